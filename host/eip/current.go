package eip

import (
	"context"
	"slices"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
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
func (m *Manager) Current(ctx context.Context, svc *v1.Service) (string, bool, error) {
	own, err := m.api.ReservationsWithTags(ctx, Tags(m.clusterID, svc.Namespace, svc.Name)...)
	if err != nil {
		return "", false, err
	}
	var shared []metalv1.IPReservation
	if key := SharingKey(svc); key != "" {
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
	if ip := svc.Spec.LoadBalancerIP; ip != "" && !writtenByCCM(svc) && checkRequestedIP(ip) == nil {
		return ip, true, nil
	}
	return "", len(own)+len(shared) > 0, nil
}
