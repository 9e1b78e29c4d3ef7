package eip

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Current returns the Service's address for GetLoadBalancer: its own
// reservation's, its sharing key's once the Service holds it, or its own
// spec.loadBalancerIP.
func (m *Manager) Current(ctx context.Context, svc *v1.Service) (string, bool, error) {
	own, err := m.api.ReservationsWithTags(ctx, Tags(m.clusterID, svc.Namespace, svc.Name)...)
	if err != nil {
		return "", false, err
	}
	if res := m.pick(nil, own, ""); res != nil && !pending(res) {
		return res.GetAddress(), true, nil
	}
	if key := SharingKey(svc); key != "" {
		shared, err := m.api.ReservationsWithTags(ctx, SharedTags(m.clusterID, key)...)
		if err != nil {
			return "", false, err
		}
		if res := m.pick(nil, shared, ""); res != nil && !pending(res) && slices.Contains(previous(svc), res.GetAddress()) {
			return res.GetAddress(), true, nil
		}
	}
	if ip := svc.Spec.LoadBalancerIP; ip != "" && !writtenByCCM(svc) && checkRequestedIP(ip) == nil {
		return ip, true, nil
	}
	return "", false, nil
}
