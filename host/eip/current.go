package eip

import (
	"context"
	"slices"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// Current returns the Service's address for GetLoadBalancer: its own
// reservation's, its sharing key's once the Service holds it, or its own
// spec.loadBalancerIP; and whether the Service has a load balancer at all.
//
// A Service also has one, without an address, while a reservation that
// Release would look at exists: its own still pending approval, or its
// sharing key's (pending, or held by other Services only). The service
// controller calls EnsureLoadBalancerDeleted only for a load balancer that
// GetLoadBalancer says exists, and removes its finalizer either way: a
// Service deleted (or no longer of type LoadBalancer) while Equinix had not
// approved its reservation would be gone without a release, and the
// reservation would turn "created" later for nobody, which orphanEIPs=report
// never releases. Release then deletes the pending reservation (or, should
// Equinix refuse to while it is pending, fails, so the finalizer stays and
// the service controller retries until it can).
//
// It returns one address per family of the Service (families), in that
// order; a reservation of either family makes the load balancer exist.
func (m *Manager) Current(ctx context.Context, svc *v1.Service) ([]string, bool, error) {
	fams := families(svc)
	var out []string
	exists := false
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		ip, ok, err := m.view(fam).currentOne(ctx, forFamily(svc, fam))
		if err != nil {
			return nil, false, err
		}
		exists = exists || ok
		if ip != "" && slices.Contains(fams, fam) {
			out = append(out, ip)
		}
	}
	if len(out) == 2 && fams[0] == v1.IPv6Protocol {
		out[0], out[1] = out[1], out[0]
	}
	return out, exists, nil
}

// currentOne is Current for the family of m, a view.
func (m *Manager) currentOne(ctx context.Context, svc *v1.Service) (string, bool, error) {
	own, err := m.api.ReservationsWithTags(ctx, Tags(m.clusterID, svc.Namespace, svc.Name)...)
	if err != nil {
		return "", false, err
	}
	var shared []metalv1.IPReservation
	if key := lbsnapshot.SharingKey(svc); key != "" {
		if shared, err = m.api.ReservationsWithTags(ctx, SharedTags(m.clusterID, key)...); err != nil {
			return "", false, err
		}
	}
	if res := m.pick(nil, own, ""); res != nil && !pending(res) {
		return res.GetAddress(), true, nil
	}
	if res := m.pick(nil, shared, ""); res != nil && !pending(res) && slices.Contains(previous(svc), res.GetAddress()) {
		return res.GetAddress(), true, nil
	}
	if ip := svc.Spec.LoadBalancerIP; ip != "" && !writtenByCCM(svc) && checkRequestedIP(ip) == nil && familyOf(ip) == m.family {
		return ip, true, nil
	}
	return "", len(own)+len(shared) > 0, nil
}
