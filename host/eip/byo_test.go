package eip

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

// ReservationHolding is the fake's Elastic IP holding addr: its address,
// or a block (Network/Cidr) containing it.
func (f *fakeAPI) ReservationHolding(_ context.Context, addr string) (*metalv1.IPReservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, nil
	}
	for _, r := range f.res {
		network, bits := r.GetAddress(), 32
		if r.Network != nil {
			network = r.GetNetwork()
		}
		if r.Cidr != nil {
			bits = int(r.GetCidr())
		}
		if n, err := netip.ParseAddr(network); err == nil {
			if p, err := n.Prefix(bits); err == nil && p.Contains(a) {
				return &r, nil
			}
		}
	}
	return nil, nil
}

func (f *fakeAPI) ProjectID() string { return "project-1" }

// userReservation is an Elastic IP the user reserved in metro (without the
// CCM's tags): an address to bring.
func userReservation(id, addr, metro string) metalv1.IPReservation {
	r := metalv1.IPReservation{Id: ptr(id), Address: ptr(addr), State: ptr("created")}
	if metro != "" {
		r.Metro = &metalv1.IPReservationMetro{Code: ptr(metro)}
	}
	return r
}

// TestOwnAddressRefusal: the pure rule of which bring-your-own addresses
// are served. Only an Elastic IP of the project, where placement puts the
// Service (when it puts it anywhere), is; an address the project does not
// hold may be someone else's, and reporting it would be a silent black
// hole (or a hijack).
func TestOwnAddressRefusal(t *testing.T) {
	da := &location.Location{Metro: "da"}
	block := userReservation("b", "147.75.8.0", "da")
	block.Network, block.Cidr = ptr("147.75.8.0"), ptr(int32(29))
	for _, tc := range []struct {
		name string
		res  *metalv1.IPReservation
		loc  *location.Location
		want []string // all in the error; none means served
	}{
		{name: "reserved where placement puts the Service", res: ptr(userReservation("r", "145.60.80.60", "da")), loc: da},
		{name: "reserved, placement decides nothing", res: ptr(userReservation("r", "145.60.80.60", "sv"))},
		{name: "a block of the project", res: &block, loc: da},
		{name: "not reserved, placed in da", loc: da, want: []string{
			"spec.loadBalancerIP 145.60.80.60 is not an Elastic IP reservation of project project-1 in metro da",
			"reserve 145.60.80.60 in project project-1 (metro da)", "remove spec.loadBalancerIP"}},
		{name: "not reserved, placement decides nothing", want: []string{
			"spec.loadBalancerIP 145.60.80.60 is not an Elastic IP reservation of project project-1:",
			"remove spec.loadBalancerIP"}},
		{name: "reserved in another metro", res: ptr(userReservation("r", "145.60.80.60", "sv")), loc: da, want: []string{
			"spec.loadBalancerIP 145.60.80.60 is not an Elastic IP reservation of project project-1 in metro da",
			"it is reserved in metro sv", "remove spec.loadBalancerIP"}},
		{name: "reserved in another facility", res: &metalv1.IPReservation{Address: ptr("145.60.80.60"), Facility: &metalv1.IPReservationFacility{Code: ptr("sv15")}},
			loc: &location.Location{Facility: "da11"}, want: []string{"in facility da11", "it is reserved in facility sv15"}},
		{name: "reserved, pending approval", res: &metalv1.IPReservation{Address: ptr("145.60.80.60"), State: ptr("pending"), Metro: &metalv1.IPReservationMetro{Code: ptr("da")}}, loc: da},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ownAddressRefusal("145.60.80.60", tc.res, tc.loc, "project-1")
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("served; want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestRestoredServiceIsNotBroughtBack: the audit's case. A Service the CCM
// had an Elastic IP for was deleted (the CCM released the address) and is
// created again from a saved object: spec.loadBalancerIP kept,
// managedFields stripped, so it reads as bring-your-own. The address is no
// reservation of the project any more; the sync fails with the reason and
// the fix, reserves nothing, writes nothing, and costs no Equinix call.
func TestRestoredServiceIsNotBroughtBack(t *testing.T) {
	for _, key := range []string{"", "k"} {
		t.Run("sharing key "+key, func(t *testing.T) {
			ann := map[string]string{"metal.equinix.com/eip-metro": "da"}
			if key != "" {
				ann[lbsnapshot.SharingAnnotation] = key
			}
			s := svc("restored", ann, "147.75.0.1")
			api := &fakeAPI{}
			m, rec, kube := setup(t, s, api)
			ip, err := ensure1(m, context.Background(), s)
			if err == nil || ip != "" {
				t.Fatalf("Ensure = %q, %v; want no address and an error", ip, err)
			}
			for _, w := range []string{"147.75.0.1", "not an Elastic IP reservation of project project-1 in metro da", "remove spec.loadBalancerIP"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if api.calls != 0 || len(api.requests) != 0 {
				t.Errorf("%d Equinix calls, %d reservations requested", api.calls, len(api.requests))
			}
			got, _ := kube.CoreV1().Services("default").Get(context.Background(), "restored", metav1.GetOptions{})
			if got.Spec.LoadBalancerIP != "147.75.0.1" || len(got.Status.LoadBalancer.Ingress) != 0 {
				t.Errorf("the Service changed: spec.loadBalancerIP %q, status %v", got.Spec.LoadBalancerIP, got.Status.LoadBalancer.Ingress)
			}
			// The service controller's SyncLoadBalancerFailed carries the
			// error; no ElasticIPFailed or ElasticIPAssigned besides.
			if ev := events(rec); len(ev) != 0 {
				t.Errorf("events %q", ev)
			}

			// Reserved in the project (the user's fix): served as before.
			api.res = append(api.res, userReservation("mine", "147.75.0.1", "da"))
			if ip, err := ensure1(m, context.Background(), s); err != nil || ip != "147.75.0.1" {
				t.Fatalf("after reserving it: %q, %v", ip, err)
			}
		})
	}
}
