package lbsnapshot

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAnnouncement: the pure rule behind NoAnnouncingNode. A Local Service
// is routed only to nodes with its ready endpoints, and only BGP nodes
// announce its address: when the two sets do not meet, the address is a
// black hole.
func TestAnnouncement(t *testing.T) {
	local := func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }
	class := "other.io/lb"
	bgpNodes := map[string]bool{"worker-0": true, "worker-1": true}
	for _, tc := range []struct {
		name  string
		svc   *v1.Service
		ready []string
		bgp   map[string]bool
		want  Announcement
	}{
		{name: "local, endpoints on BGP nodes", svc: with(service("default", "web", "145.40.1.5"), local), ready: []string{"worker-1", "cp-0"}, bgp: bgpNodes,
			want: Announcement{Applies: true, Ready: []string{"cp-0", "worker-1"}, Announcers: []string{"worker-1"}}},
		{name: "local, endpoints only off BGP nodes", svc: with(service("default", "web", "145.40.1.5"), local), ready: []string{"cp-1", "cp-0", "cp-0"}, bgp: bgpNodes,
			want: Announcement{Applies: true, Ready: []string{"cp-0", "cp-1"}}},
		{name: "local, no ready endpoint", svc: with(service("default", "web", "145.40.1.5"), local), bgp: bgpNodes,
			want: Announcement{Applies: true}},
		{name: "cluster policy", svc: service("default", "web", "145.40.1.5"), ready: []string{"cp-0"}, bgp: bgpNodes},
		{name: "no address yet", svc: with(service("default", "web"), local), ready: []string{"cp-0"}, bgp: bgpNodes},
		{name: "another load balancer's", svc: with(service("default", "web", "145.40.1.5"), func(s *v1.Service) { local(s); s.Spec.LoadBalancerClass = &class }), ready: []string{"cp-0"}, bgp: bgpNodes},
		// No BGP node at all fails every Service alike, Cluster ones too:
		// the cluster's problem (the BGP controller's), not this Service's.
		{name: "no BGP node at all", svc: with(service("default", "web", "145.40.1.5"), local), ready: []string{"cp-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Announce(tc.svc, tc.ready, tc.bgp)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Announce = %+v, want %+v", got, tc.want)
			}
			if black := tc.want.Applies && len(tc.want.Ready) > 0 && len(tc.want.Announcers) == 0; got.Unannounced() != black {
				t.Errorf("Unannounced() = %v, want %v", got.Unannounced(), black)
			}
		})
	}
}

// TestReadyNodes: the nodes of a Service's ready endpoints, from its
// EndpointSlices: ready unset counts as ready (the API's rule), a
// terminating or not-ready endpoint does not, nor one without a node.
func TestReadyNodes(t *testing.T) {
	yes, no := true, false
	node := func(n string) *string { return &n }
	slices := []*discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-a"}, Endpoints: []discoveryv1.Endpoint{
			{NodeName: node("worker-1"), Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
			{NodeName: node("worker-0")},
			{NodeName: node("cp-0"), Conditions: discoveryv1.EndpointConditions{Ready: &no}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-b"}, Endpoints: []discoveryv1.Endpoint{
			{NodeName: node("worker-1")},
			{Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
		}},
	}
	if got, want := ReadyNodes(slices), []string{"worker-0", "worker-1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadyNodes = %v, want %v", got, want)
	}
	if got := ReadyNodes(nil); got != nil {
		t.Fatalf("ReadyNodes(nil) = %v", got)
	}
}
