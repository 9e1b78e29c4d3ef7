package eip

import (
	"context"
	"strings"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
)

// statusIPs stands in for the module's input (provider's announcedBy): the
// status addresses of the Services, each in the metro its Service's
// annotation names (the reservation cache's answer in the CCM).
func statusIPs(services []*v1.Service) map[string]string {
	out := map[string]string{}
	for _, s := range services {
		for _, in := range s.Status.LoadBalancer.Ingress {
			out[in.IP] = s.Annotations["metal.equinix.com/eip-metro"]
		}
	}
	return out
}

// TestPrefixCap: with the cap on, a new Elastic IP is refused (no request,
// a Warning naming the limit and the fixes) once the addresses announced,
// plus the live Services' reservations not announced yet, reach the limit;
// what makes no new reservation (a sharing key's, the user's own address)
// passes; without the cap everything is reserved, as before.
func TestPrefixCap(t *testing.T) {
	metro := map[string]string{"metal.equinix.com/eip-metro": "da"}
	sv := map[string]string{"metal.equinix.com/eip-metro": "sv"}
	announced := func(name, ip string) *v1.Service { return ccmWrote(svc(name, metro, ""), ip) }
	announcedIn := func(name, ip string) *v1.Service { return ccmWrote(svc(name, sv, ""), ip) }
	reservedIn := func(id, owner, ip, at string) metalv1.IPReservation {
		return metalv1.IPReservation{Id: ptr(id), Address: ptr(ip), State: ptr("created"), Tags: Tags("cluster-uid", "default", owner), Metro: &metalv1.IPReservationMetro{Code: ptr(at)}}
	}
	reserved := func(id, owner, ip string) metalv1.IPReservation {
		state := "created"
		if ip == "" {
			state = "pending"
		}
		return metalv1.IPReservation{Id: ptr(id), Address: ptr(ip), State: ptr(state), Tags: Tags("cluster-uid", "default", owner)}
	}
	cases := []struct {
		name     string
		off      bool // no cap: bgpMaxPrefixesAction=warn
		others   []*v1.Service
		existing []metalv1.IPReservation
		svc      *v1.Service
		refused  bool
	}{
		{name: "off, at the limit", off: true, others: []*v1.Service{announced("a", "10.0.0.1"), announced("b", "10.0.0.2")}, svc: svc("new", metro, "")},
		{name: "under the limit", others: []*v1.Service{announced("a", "10.0.0.1")}, svc: svc("new", metro, ""), existing: []metalv1.IPReservation{reserved("ra", "a", "10.0.0.1")}},
		{name: "at the limit", others: []*v1.Service{announced("a", "10.0.0.1"), announced("b", "10.0.0.2")}, svc: svc("new", metro, ""), refused: true},
		{name: "a reservation not announced yet counts", others: []*v1.Service{announced("a", "10.0.0.1"), svc("b", metro, "")},
			existing: []metalv1.IPReservation{reserved("rb", "b", "10.0.0.2")}, svc: svc("new", metro, ""), refused: true},
		{name: "a pending reservation counts", others: []*v1.Service{announced("a", "10.0.0.1"), svc("b", metro, "")},
			existing: []metalv1.IPReservation{reserved("rb", "b", "")}, svc: svc("new", metro, ""), refused: true},
		{name: "another metro's addresses do not count: its nodes announce them, not da's",
			others:   []*v1.Service{announced("a", "10.0.0.1"), announcedIn("b", "10.0.0.2"), announcedIn("c", "10.0.0.3"), svc("d", sv, "")},
			existing: []metalv1.IPReservation{reservedIn("rd", "d", "10.0.0.4", "sv")}, svc: svc("new", metro, "")},
		{name: "a new Elastic IP in sv at sv's limit", others: []*v1.Service{announced("a", "10.0.0.1"), announcedIn("b", "10.0.0.2"), svc("d", sv, "")},
			existing: []metalv1.IPReservation{reservedIn("rd", "d", "10.0.0.4", "sv")}, svc: svc("new", sv, ""), refused: true},
		{name: "an orphan does not count", others: []*v1.Service{announced("a", "10.0.0.1")},
			existing: []metalv1.IPReservation{reserved("rgone", "gone", "10.0.0.9")}, svc: svc("new", metro, "")},
		{name: "sharing a key's address", others: []*v1.Service{announced("a", "10.0.0.1"), ccmWrote(keyed("k1", 80), "10.0.0.2")},
			existing: []metalv1.IPReservation{{Id: ptr("rk"), Address: ptr("10.0.0.2"), State: ptr("created"), Tags: SharedTags("cluster-uid", "k")}}, svc: keyed("k2", 443)},
		{name: "IPv6 has a session and a limit of its own", others: []*v1.Service{announced("a", "10.0.0.1"), announced("b", "10.0.0.2")}, svc: ipv6Only(svc("new", metro, ""))},
		{name: "IPv6 at its own limit", others: []*v1.Service{announced("a", "2604:1380::1"), announced("b", "2604:1380::2")}, svc: ipv6Only(svc("new", metro, "")), refused: true},
		{name: "the user's own address", others: []*v1.Service{announced("a", "10.0.0.1"), announced("b", "10.0.0.2")}, svc: svc("new", nil, "145.60.80.60"),
			existing: []metalv1.IPReservation{userReservation("mine", "145.60.80.60", "da")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, api, rec, _ := sharedSetup(append([]*v1.Service{tc.svc}, tc.others...)...)
			api.res = tc.existing
			all := append([]*v1.Service{tc.svc}, tc.others...)
			m.SetServices(Services{List: func() ([]*v1.Service, error) { return all, nil }})
			if !tc.off {
				m.SetPrefixCap(PrefixCap{Limit: 2, Announced: statusIPs})
			}
			ip, err := ensure1(m, context.Background(), tc.svc)
			ev := strings.Join(events(rec), "\n")
			if !tc.refused {
				if err != nil || ip == "" || strings.Contains(ev, reasonPrefixLimit) {
					t.Fatalf("Ensure = %q, %v; want an address; events:\n%s", ip, err, ev)
				}
				return
			}
			if err == nil || ip != "" || len(api.requests) != 0 {
				t.Fatalf("Ensure = %q, %v with %d requests; want refused before any request", ip, err, len(api.requests))
			}
			for _, want := range []string{"Warning " + reasonPrefixLimit, "announce 2 Service addresses", "bgpMaxPrefixes 2", "max prefix", "delete LoadBalancer Services"} {
				if !strings.Contains(ev, want) {
					t.Errorf("events lack %q:\n%s", want, ev)
				}
			}
		})
	}
}

// ipv6Only makes s an IPv6 single-stack Service.
func ipv6Only(s *v1.Service) *v1.Service {
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	return s
}
