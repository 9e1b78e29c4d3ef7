package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
	svcs := m.kube.CoreV1().Services(ExternalServiceNamespace)
	svc, err := svcs.Apply(ctx, externalService(m.res.address, src, targetPort, m.opts.APIServerPort), applyOptions)
	if err != nil {
		return fmt.Errorf("applying Service %s/%s: %w", ExternalServiceNamespace, ExternalServiceName, err)
	}
	m.serviceRef = &v1.ObjectReference{
		Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name,
		UID: svc.UID, ResourceVersion: svc.ResourceVersion,
	}
	if _, err := svcs.ApplyStatus(ctx, externalServiceStatus(m.res.address), applyOptions); err != nil {
		return fmt.Errorf("applying the status of Service %s/%s: %w", ExternalServiceNamespace, ExternalServiceName, err)
	}

	eps := m.kube.DiscoveryV1().EndpointSlices(ExternalServiceNamespace)
	want := map[string]bool{}
	var errs []error
	for _, s := range mirrorSlices(srcSlices, svc.UID) {
		want[*s.Name] = true
		if _, err := eps.Apply(ctx, s, applyOptions); err != nil {
			errs = append(errs, fmt.Errorf("applying EndpointSlice %s/%s: %w", ExternalServiceNamespace, *s.Name, err))
		}
	}
	// Prune mirrors whose source is gone. Only slices labelled as ours and
	// as the external Service's are candidates.
	sel := labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: ExternalServiceName,
		ManagedByLabel:               ManagedBy,
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
			errs = append(errs, fmt.Errorf("deleting stale EndpointSlice %s/%s: %w", ExternalServiceNamespace, s.Name, err))
		}
	}
	return errors.Join(errs...)
}
