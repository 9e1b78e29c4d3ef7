package controlplane

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
)

// TestIntegrationRecreatesUpstreamService: a cluster moving from upstream
// has the external Service without a loadBalancerClass (and the service
// controller's finalizer on it). The class cannot be added in place, so the
// manager deletes and recreates the Service, says so in an Event, and the
// status and mirrored endpoints come back. After a rollback, upstream's
// apply (same field manager, no class) must neither fail nor drop it.
func TestIntegrationRecreatesUpstreamService(t *testing.T) {
	c := startCluster(t)
	svcs := c.kube.CoreV1().Services(externalServiceNamespace)
	upstream := func() *corev1ac.ServiceApplyConfiguration {
		return corev1ac.Service(externalServiceName, externalServiceNamespace).
			WithAnnotations(map[string]string{metalLBAddressPoolAnnotation: metalLBDisabledPool}).
			WithSpec(corev1ac.ServiceSpec().WithType(v1.ServiceTypeLoadBalancer).WithLoadBalancerIP(c.eip).
				WithPorts(corev1ac.ServicePort().WithName("https").WithPort(int32(c.port)).WithTargetPort(intstr.FromInt32(int32(c.port)))))
	}
	old, err := svcs.Apply(c.ctx, upstream().WithFinalizers(lbCleanupFinalizer), metav1.ApplyOptions{FieldManager: fieldmanager.CCM})
	if err != nil {
		t.Fatal(err)
	}

	m := c.startManager(Options{UseHostIP: true, Interval: 200 * time.Millisecond, Timeout: 500 * time.Millisecond, Failures: 3})
	c.settle(m, "a")
	var svc *v1.Service
	err = wait.PollUntilContextTimeout(c.ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		svc, err = svcs.Get(ctx, externalServiceName, metav1.GetOptions{})
		return err == nil && svc.UID != old.UID && len(svc.Status.LoadBalancer.Ingress) == 1, nil
	})
	if err != nil {
		t.Fatalf("the external Service was not recreated with its status: %+v", svc)
	}
	if cl := svc.Spec.LoadBalancerClass; cl == nil || *cl != loadBalancerClass || svc.Status.LoadBalancer.Ingress[0].IP != c.eip {
		t.Fatalf("recreated Service: class %v, ingress %v; want %s and %s", cl, svc.Status.LoadBalancer.Ingress, loadBalancerClass, c.eip)
	}
	err = wait.PollUntilContextTimeout(c.ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return slices.ContainsFunc(c.events(reasonServiceRecreated), func(m string) bool {
			return strings.Contains(m, "spec.loadBalancerClass is none, want "+loadBalancerClass)
		}), nil
	})
	if err != nil {
		t.Errorf("no %s event saying why: %v", reasonServiceRecreated, c.events(reasonServiceRecreated))
	}
	err = wait.PollUntilContextTimeout(c.ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := c.kube.DiscoveryV1().EndpointSlices(externalServiceNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + externalServiceName})
		return err == nil && len(l.Items) == 1 && len(l.Items[0].OwnerReferences) == 1 && l.Items[0].OwnerReferences[0].UID == svc.UID, nil
	})
	if err != nil {
		t.Errorf("the mirrored EndpointSlice is not owned by the recreated Service")
	}

	// Rollback: upstream applies its Service again, without the class.
	c.cancelManager()
	if _, err := svcs.Apply(c.ctx, upstream(), metav1.ApplyOptions{FieldManager: fieldmanager.CCM}); err != nil {
		t.Fatalf("upstream's apply after a rollback: %v", err)
	}
	got, err := svcs.Get(c.ctx, externalServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cl := got.Spec.LoadBalancerClass; cl == nil || *cl != loadBalancerClass || got.UID != svc.UID {
		t.Fatalf("after upstream's apply: class %v, UID changed %v; want the class kept", cl, got.UID != svc.UID)
	}
}
