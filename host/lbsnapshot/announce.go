package lbsnapshot

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Announcement is whether a Service's address has a BGP node to announce
// it, for a Service with externalTrafficPolicy Local: such a Service is
// announced (MetalLB's speakers, kube-vip) only from nodes that have one of
// its ready endpoints, and only BGP nodes have a session with Equinix's
// routers. The CCM's module input says nothing about endpoints (the
// module's announcers read them themselves); this is the CCM's own check
// that the two sets meet. Announce computes it, and host/lbmodule's
// NoAnnouncingNode Events report what it finds (Unannounced).
type Announcement struct {
	// Applies: a Local Service this provider load-balances, with an
	// address in the module's view, and at least one BGP node in the
	// cluster (with none, every Service is unannounced, Cluster ones too:
	// a problem of the cluster, not of one Service).
	Applies bool
	// Ready are the nodes of its ready endpoints, sorted.
	Ready []string
	// Announcers are those of Ready that are BGP nodes.
	Announcers []string
}

// Unannounced: a black hole. The Service has an address in its status and
// ready endpoints, yet no router has a path for it.
func (a Announcement) Unannounced() bool {
	return a.Applies && len(a.Ready) > 0 && len(a.Announcers) == 0
}

// Announce is the Announcement of svc, whose ready endpoints are on the
// nodes ready (any order, duplicates allowed), with bgp the BGP nodes the
// module's input has. Its cost is that of the Service's own endpoints,
// whatever the size of the cluster.
func Announce(svc *v1.Service, ready []string, bgp map[string]bool) Announcement {
	if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal || !ourLoadBalancer(svc) || len(bgp) == 0 {
		return Announcement{}
	}
	if _, ok := ServiceFromK8s(svc); !ok {
		return Announcement{}
	}
	a := Announcement{Applies: true}
	if len(ready) == 0 {
		return a
	}
	a.Ready = slices.Compact(slices.Sorted(slices.Values(ready)))
	for _, n := range a.Ready {
		if bgp[n] {
			a.Announcers = append(a.Announcers, n)
		}
	}
	return a
}

// ReadyNodes are the nodes of the ready endpoints of one Service's
// EndpointSlices, sorted and without duplicates: an endpoint whose ready
// condition is unset counts as ready (the API's rule), one without a node
// name counts for no node.
func ReadyNodes(eps []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range eps {
		for _, e := range s.Endpoints {
			if e.NodeName == nil || *e.NodeName == "" || (e.Conditions.Ready != nil && !*e.Conditions.Ready) {
				continue
			}
			out = append(out, *e.NodeName)
		}
	}
	if out == nil {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}
