package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
)

var applyOptions = metav1.ApplyOptions{FieldManager: fieldmanager.CCM, Force: true}

// syncExternal applies the external Service, its status and the mirrored
// EndpointSlices when default/kubernetes changed, the EIP or the port
// changed, or Resync has passed (someone may have edited or deleted them).
// Server-side apply makes an unchanged object a no-op on the server.
func (m *Manager) syncExternal(ctx context.Context, now time.Time, src *v1.Service, srcSlices []*discoveryv1.EndpointSlice, targetPort int) error {
	dirty := m.takeExternalDirty()
	if !dirty && m.externEIP == m.res.address && m.externPort == targetPort && now.Sub(m.externAt) < m.opts.Resync {
		return nil
	}
	err := m.applyExternal(ctx, src, srcSlices, targetPort)
	if err != nil {
		m.markExternalDirtyQuiet()
		return err
	}
	m.externAt, m.externEIP, m.externPort = now, m.res.address, targetPort
	return nil
}

func (m *Manager) markExternalDirtyQuiet() {
	m.dirtyMu.Lock()
	m.dirtyExtern = true
	m.dirtyMu.Unlock()
}

func (m *Manager) applyExternal(ctx context.Context, src *v1.Service, srcSlices []*discoveryv1.EndpointSlice, targetPort int) error {
	svcs := m.kube.CoreV1().Services(externalServiceNamespace)
	recreated, err := m.recreateIfNeeded(ctx)
	if err != nil {
		return err
	}
	svc, err := svcs.Apply(ctx, externalService(m.res.address, src, targetPort, m.opts.APIServerPort), applyOptions)
	if err != nil {
		return fmt.Errorf("applying Service %s/%s: %w", externalServiceNamespace, externalServiceName, err)
	}
	if !isManagedBy(svc, classFieldManager) {
		if _, err := svcs.Apply(ctx, classOnly(), metav1.ApplyOptions{FieldManager: classFieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying the loadBalancerClass of Service %s/%s: %w", externalServiceNamespace, externalServiceName, err)
		}
	}
	m.serviceRef = &v1.ObjectReference{
		Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name,
		UID: svc.UID, ResourceVersion: svc.ResourceVersion,
	}
	if recreated != "" {
		m.event(v1.EventTypeNormal, reasonServiceRecreated, "Recreated Service %s/%s: %s. Without the class MetalLB clears the control-plane EIP from its status; traffic to the EIP from inside the cluster paused while it was recreated",
			externalServiceNamespace, externalServiceName, recreated)
	}
	if _, err := svcs.ApplyStatus(ctx, externalServiceStatus(m.res.address), applyOptions); err != nil {
		return fmt.Errorf("applying the status of Service %s/%s: %w", externalServiceNamespace, externalServiceName, err)
	}

	eps := m.kube.DiscoveryV1().EndpointSlices(externalServiceNamespace)
	want := map[string]bool{}
	var errs []error
	for _, s := range mirrorSlices(srcSlices, svc.UID) {
		want[*s.Name] = true
		if _, err := eps.Apply(ctx, s, applyOptions); err != nil {
			errs = append(errs, fmt.Errorf("applying EndpointSlice %s/%s: %w", externalServiceNamespace, *s.Name, err))
		}
	}
	// Prune mirrors whose source is gone. Only slices labelled as ours and
	// as the external Service's are candidates.
	sel := labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: externalServiceName,
		managedByLabel:               managedBy,
	}).String()
	have, err := eps.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("listing mirrored EndpointSlices: %w", err))...)
	}
	for _, s := range have.Items {
		if want[s.Name] {
			continue
		}
		if err := eps.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting stale EndpointSlice %s/%s: %w", externalServiceNamespace, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// lbCleanupFinalizer is the cloud-provider service controller's finalizer.
// It put it on external Services that had no class; it would hold their
// deletion until that controller, which now skips the Service, removed it.
const lbCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// recreateIfNeeded deletes an external Service that cannot be brought up
// to date in place (see needsRecreate), so that the apply which follows
// creates it anew; it returns why it did, "" when it did not. The delete
// is bound to the UID it inspected, so a Service someone else just
// recreated is not deleted.
func (m *Manager) recreateIfNeeded(ctx context.Context) (string, error) {
	svcs := m.kube.CoreV1().Services(externalServiceNamespace)
	old, err := svcs.Get(ctx, externalServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading Service %s/%s: %w", externalServiceNamespace, externalServiceName, err)
	}
	why := needsRecreate(old)
	if why == "" {
		return "", nil
	}
	klog.FromContext(ctx).Info("Recreating the external control-plane Service", "service", externalServiceNamespace+"/"+externalServiceName, "reason", why)
	if slices.Contains(old.Finalizers, lbCleanupFinalizer) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"finalizers":      slices.DeleteFunc(slices.Clone(old.Finalizers), func(f string) bool { return f == lbCleanupFinalizer }),
			"resourceVersion": old.ResourceVersion,
		}})
		if _, err := svcs.Patch(ctx, old.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldmanager.CCM}); err != nil {
			return "", fmt.Errorf("removing the finalizer %s from Service %s/%s before recreating it: %w", lbCleanupFinalizer, externalServiceNamespace, externalServiceName, err)
		}
	}
	err = svcs.Delete(ctx, old.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("deleting Service %s/%s to recreate it (%s): %w", externalServiceNamespace, externalServiceName, why, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := svcs.Get(ctx, old.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && cur.UID != old.UID), nil
	})
	if err != nil {
		return "", fmt.Errorf("the Service %s/%s is still being deleted (finalizers %v); the next round recreates it", externalServiceNamespace, externalServiceName, old.Finalizers)
	}
	return why, nil
}

// isManagedBy reports whether manager owns fields of the object.
func isManagedBy(svc *v1.Service, manager string) bool {
	for _, mf := range svc.ManagedFields {
		if mf.Manager == manager {
			return true
		}
	}
	return false
}
