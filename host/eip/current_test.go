package eip

import (
	"context"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// TestCurrent: what GetLoadBalancer reports. A reservation the Service
// would release exists as a load balancer even without an address for it
// (pending approval, or its sharing key's held by others), so that the
// service controller calls EnsureLoadBalancerDeleted before it drops the
// Service's finalizer.
func TestCurrent(t *testing.T) {
	reservation := func(id, state, addr string, tags []string) metalv1.IPReservation {
		return metalv1.IPReservation{Id: ptr(id), State: ptr(state), Address: ptr(addr), Tags: tags}
	}
	own := Tags("cluster-uid", "default", "web")
	shared := SharedTags("cluster-uid", "k")
	withKey := map[string]string{lbsnapshot.SharingAnnotation: "k"}
	cases := []struct {
		name       string
		res        []metalv1.IPReservation
		ann        map[string]string
		lbIP, held string // spec.loadBalancerIP (the user's), status
		wantIP     string
		wantExists bool
	}{
		{name: "nothing", wantExists: false},
		{name: "own, created", res: []metalv1.IPReservation{reservation("a", "created", "147.75.0.1", own)}, wantIP: "147.75.0.1", wantExists: true},
		{name: "own, pending approval", res: []metalv1.IPReservation{reservation("a", "pending", "", own)}, wantExists: true},
		{name: "key's, held", ann: withKey, held: "147.75.0.2", res: []metalv1.IPReservation{reservation("s", "created", "147.75.0.2", shared)}, wantIP: "147.75.0.2", wantExists: true},
		{name: "key's, pending approval", ann: withKey, res: []metalv1.IPReservation{reservation("s", "pending", "", shared)}, wantExists: true},
		{name: "key's, held by others only", ann: withKey, res: []metalv1.IPReservation{reservation("s", "created", "147.75.0.2", shared)}, wantExists: true},
		{name: "another key's", ann: map[string]string{lbsnapshot.SharingAnnotation: "other"}, res: []metalv1.IPReservation{reservation("s", "created", "147.75.0.2", shared)}, wantExists: false},
		{name: "the user's own address", lbIP: "145.60.80.60", wantIP: "145.60.80.60", wantExists: true},
		{name: "the user's own address over its key's", ann: withKey, lbIP: "145.60.80.60", res: []metalv1.IPReservation{reservation("s", "created", "147.75.0.2", shared)}, wantIP: "145.60.80.60", wantExists: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("web", tc.ann, tc.lbIP)
			if tc.held != "" {
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: tc.held}}
			}
			m, _, _ := setup(t, s, &fakeAPI{res: tc.res})
			ip, exists, err := current1(m, context.Background(), s)
			if err != nil || ip != tc.wantIP || exists != tc.wantExists {
				t.Fatalf("Current = %q, %v, %v; want %q, %v", ip, exists, err, tc.wantIP, tc.wantExists)
			}
		})
	}
}
