package emulator_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// TestIPv6ElasticIPsAndSessions: what the CCM does for an IPv6 Service,
// every exchange checked against the SDK's spec: a public_ipv6 request of
// one address is a /128 of the metro's IPv6 block, outside the project's
// /56, with address_family 6; the listing with both types has it and the
// management /56; a device's IPv6 session gives neighbour data of family 6
// (fc00::e and fc00::f, the device's IPv6 as customer_ip); a metro seeded
// without IPv6 reservations refuses the request with 422.
func TestIPv6ElasticIPsAndSessions(t *testing.T) {
	seed := testSeed()
	seed.Projects[0].BGP = &emulator.BGPConfigSeed{}
	for i := range seed.Metros {
		if seed.Metros[i].Code == "sv" {
			seed.Metros[i].NoIPv6Reservations = true
		}
	}
	_, client := start(t, seed, emulator.Options{})
	c := client(tokAll)

	req := metalv1.IPReservationRequestInput{Type: "public_ipv6", Quantity: 1, Metro: metalv1.PtrString("da"), Tags: []string{"usage=cloud-provider-equinix-metal-auto"},
		FailOnApprovalRequired: metalv1.PtrBool(true)}
	res, resp, err := c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&req)).Execute()
	wantStatus(t, resp, err, 201, "")
	r := res.IPReservation
	if r == nil || r.GetCidr() != 128 || r.GetAddressFamily() != 6 || r.GetType() != metalv1.IPRESERVATIONTYPE_PUBLIC_IPV6 || r.GetManagement() || r.Metro.GetCode() != "da" {
		t.Fatalf("reservation %+v", r)
	}
	addr := netip.MustParseAddr(r.GetAddress())

	list, resp, err := c.IPAddressesApi.FindIPReservations(ctx, projA).
		Types([]metalv1.FindIPReservationsTypesParameterInner{metalv1.FINDIPRESERVATIONSTYPESPARAMETERINNER_PUBLIC_IPV4, metalv1.FINDIPRESERVATIONSTYPESPARAMETERINNER_PUBLIC_IPV6}).
		Include([]string{"assignments"}).Execute()
	wantStatus(t, resp, err, 200, "")
	var mgmt56 []netip.Prefix
	found := false
	for _, it := range list.IpAddresses {
		x := it.IPReservation
		if x == nil {
			continue
		}
		if x.GetId() == r.GetId() {
			found = true
		}
		if x.GetType() == metalv1.IPRESERVATIONTYPE_PUBLIC_IPV6 && x.GetManagement() {
			mgmt56 = append(mgmt56, netip.PrefixFrom(netip.MustParseAddr(x.GetNetwork()), int(x.GetCidr())))
		}
	}
	if !found || len(mgmt56) == 0 {
		t.Fatalf("listing: the /128 found %v, management IPv6 blocks %v", found, mgmt56)
	}
	if slices.ContainsFunc(mgmt56, func(p netip.Prefix) bool { return p.Contains(addr) }) {
		t.Errorf("the Elastic IPv6 %s is inside a device block %v", addr, mgmt56)
	}

	in := metalv1.BGPSessionInput{AddressFamily: metalv1.BGPSESSIONINPUTADDRESSFAMILY_IPV6.Ptr()}
	_, resp, err = c.DevicesApi.CreateBgpSession(ctx, dev2).BGPSessionInput(in).Execute()
	wantStatus(t, resp, err, 201, "")
	_, resp, err = c.DevicesApi.CreateBgpSession(ctx, dev2).BGPSessionInput(in).Execute()
	wantStatus(t, resp, err, 422, "already has session")
	nb, resp, err := c.DevicesApi.GetBgpNeighborData(ctx, dev2).Execute()
	wantStatus(t, resp, err, 200, "")
	var v6 *metalv1.BgpNeighborData
	for i := range nb.BgpNeighbors {
		if nb.BgpNeighbors[i].GetAddressFamily() == 6 {
			v6 = &nb.BgpNeighbors[i]
		}
	}
	if v6 == nil || !slices.Equal(v6.PeerIps, []string{"fc00::e", "fc00::f"}) || v6.GetPeerAs() != 65530 {
		t.Fatalf("IPv6 neighbour %+v", v6)
	}
	if src := netip.MustParseAddr(v6.GetCustomerIp()); !src.Is6() || !slices.ContainsFunc(mgmt56, func(p netip.Prefix) bool { return p.Contains(src) }) {
		t.Errorf("customer_ip %s is not the device's IPv6 from its project's /56 %v", src, mgmt56)
	}

	req.Metro = metalv1.PtrString("sv")
	_, resp, err = c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&req)).Execute()
	wantStatus(t, resp, err, 422, "No public IPv6")
}
