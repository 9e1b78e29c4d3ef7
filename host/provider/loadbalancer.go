package provider

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbretry"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// loadBalancer implements cloudprovider.LoadBalancer: an Elastic IP per
// Service. BGP (per node) and the load balancer's own configuration (the
// module) are separate loops, so a call here costs at most the Elastic IP
// work and, when nothing changes, no Equinix Metal call at all.
type loadBalancer struct {
	// eips is set once the cluster ID is known (Initialize).
	eips atomic.Pointer[eip.Manager]
	// markDirty asks the module loop to regenerate (it coalesces bursts);
	// set once the loop runs, until then nothing is asked: the loop's first
	// sync reads everything.
	markDirty atomic.Pointer[func()]
	// ipv6 turns on the BGP nodes' IPv6 sessions (bgp.Controller's
	// EnableIPv6), called with the first IPv6 address a Service gets.
	ipv6 atomic.Pointer[func()]
	// staged are the addresses about to be written into Services, in the
	// module's view already (staged.go); awaitSync waits for a module
	// sync (lbmodule.Reconciler.AwaitSync), set once the loop runs.
	staged    stagedAddresses
	awaitSync atomic.Pointer[func(context.Context) bool]
	// retry keeps the Services whose last call here failed, to hand them
	// back to the service controller when the Equinix Metal API answers
	// again (host/lbretry).
	retry *lbretry.Retrier
}

// outcome records whether the call for svc failed, for retry, and
// returns err.
func (lb *loadBalancer) outcome(svc *v1.Service, err error) error {
	if lb.retry == nil {
		return err
	}
	if err != nil {
		lb.retry.Failed(svc)
	} else {
		lb.retry.Succeeded(svc)
	}
	return err
}

// dirty asks the module loop, if it runs, to regenerate.
func (lb *loadBalancer) dirty() {
	if f := lb.markDirty.Load(); f != nil {
		(*f)()
	}
}

func (lb *loadBalancer) setDirty(f func()) { lb.markDirty.Store(&f) }

func (lb *loadBalancer) setAwaitSync(f func(context.Context) bool) { lb.awaitSync.Store(&f) }

func (lb *loadBalancer) setEIPs(m *eip.Manager) { lb.eips.Store(m) }

func (lb *loadBalancer) setIPv6(f func()) { lb.ipv6.Store(&f) }

// announceIPv6 turns on IPv6 BGP when ips hold an IPv6 address.
func (lb *loadBalancer) announceIPv6(ips []string) {
	f := lb.ipv6.Load()
	if f == nil {
		return
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && !a.Unmap().Is4() {
			(*f)()
			return
		}
	}
}

var _ cloudprovider.LoadBalancer = (*loadBalancer)(nil)

// manager returns the EIP manager, or a retryable error while the CCM is
// still reading the cluster ID.
func (lb *loadBalancer) manager() (*eip.Manager, error) {
	m := lb.eips.Load()
	if m == nil {
		return nil, fmt.Errorf("the Equinix Metal load balancer is still initialising (reading the kube-system namespace UID); the Service is retried")
	}
	return m, nil
}

// GetLoadBalancer reports the Service's Elastic IP, and that a load
// balancer exists while a reservation the Service would release does.
func (lb *loadBalancer) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	if lbsnapshot.IsControlPlaneService(svc.Namespace, svc.Name) {
		return nil, false, cloudprovider.ImplementedElsewhere
	}
	m, err := lb.manager()
	if err != nil {
		return nil, false, err
	}
	ips, ok, err := m.Current(ctx, svc)
	if err != nil {
		// Asked before a delete: the delete's retry waits on this too.
		return nil, false, lb.outcome(svc, err)
	}
	if !ok {
		return nil, false, nil
	}
	if len(ips) == 0 {
		// A reservation without an address for the Service yet (pending
		// approval, or its sharing key's): it exists, so that the service
		// controller calls EnsureLoadBalancerDeleted, which releases it,
		// before it removes the Service's finalizer (eip.Manager.Current).
		return &v1.LoadBalancerStatus{}, true, nil
	}
	return status(ips), true, nil
}

// GetLoadBalancerName is the name Kubernetes shows in events.
func (lb *loadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// EnsureLoadBalancer gives the Service its Elastic IP.
func (lb *loadBalancer) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if lbsnapshot.IsControlPlaneService(svc.Namespace, svc.Name) {
		// The control-plane EIP has its own loop; this Service must never
		// get a second address or reach a module.
		return nil, cloudprovider.ImplementedElsewhere
	}
	m, err := lb.manager()
	if err != nil {
		return nil, err
	}
	ips, err := m.Ensure(ctx, svc)
	if lb.outcome(svc, err) != nil {
		return nil, err
	}
	lb.announceIPv6(ips)
	lb.dirty()
	return status(ips), nil
}

// UpdateLoadBalancer is called when the set of nodes changes. BGP follows
// nodes in its own loop, so there is nothing to do per Service beyond a
// (coalesced) regeneration of the module's config.
func (lb *loadBalancer) UpdateLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) error {
	if lbsnapshot.IsControlPlaneService(svc.Namespace, svc.Name) {
		return cloudprovider.ImplementedElsewhere
	}
	lb.dirty()
	return nil
}

// EnsureLoadBalancerDeleted releases the Service's Elastic IP.
func (lb *loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	if lbsnapshot.IsControlPlaneService(svc.Namespace, svc.Name) {
		return cloudprovider.ImplementedElsewhere
	}
	m, err := lb.manager()
	if err != nil {
		return err
	}
	if err := lb.outcome(svc, m.Release(ctx, svc)); err != nil {
		return err
	}
	lb.dirty()
	return nil
}

// status is the Service's load-balancer status. ipMode is VIP (traffic
// arrives addressed to the Elastic IP, as with MetalLB and kube-vip), which
// is also what the apiserver defaults it to: a status without it never
// equals the stored one, so the service controller would patch the status
// again on every sync of every Service (a write per Service per sync, each
// through the controller's client-side rate limiter). ips are in the order
// of the Service's spec.ipFamilies (eip.Manager.Ensure), which keeps the
// status stable: the service controller compares it with DeepEqual.
func status(ips []string) *v1.LoadBalancerStatus {
	vip := v1.LoadBalancerIPModeVIP
	st := &v1.LoadBalancerStatus{}
	for _, ip := range ips {
		st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: ip, IPMode: &vip})
	}
	return st
}
