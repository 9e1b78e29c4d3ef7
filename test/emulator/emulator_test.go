package emulator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator/specvalidate"
)

const (
	projA  = "6a0e1a38-4c5d-4b1f-8f7e-2f3a4b5c6d01"
	projB  = "6a0e1a38-4c5d-4b1f-8f7e-2f3a4b5c6d02"
	tokAll = "token-all"
	tokB   = "token-b-only"
	tokRO  = "token-read-only"
	dev1   = "d0000000-0000-4000-8000-000000000001"
	dev2   = "d0000000-0000-4000-8000-000000000002"
	dev3   = "d0000000-0000-4000-8000-000000000003" // sv
	devB   = "d0000000-0000-4000-8000-0000000000b1"
	cpEIP  = "e0000000-0000-4000-8000-000000000001"
	cpTag  = "cluster-api-provider-packet:cluster-id:test"
)

var ctx = context.Background()

// testSeed is two projects; project A has three devices (two in da, one in
// sv) and a control-plane EIP carrying a user tag; project B one device.
func testSeed() *emulator.Seed {
	s := emulator.DefaultSeed()
	s.Tokens = []emulator.TokenSeed{
		{Token: tokAll},
		{Token: tokB, Projects: []string{projB}},
		{Token: tokRO, ReadOnly: true},
	}
	s.Projects = []emulator.ProjectSeed{{ID: projA, Name: "a"}, {ID: projB, Name: "b"}}
	s.Devices = []emulator.DeviceSeed{
		{ID: dev1, Hostname: "cp-0", Project: projA, Metro: "da", Tags: []string{"control-plane"}},
		{ID: dev2, Hostname: "worker-0", Project: projA, Metro: "da", Plan: "m3.large.x86"},
		{ID: dev3, Hostname: "worker-1", Project: projA, Metro: "sv", State: "inactive"},
		{ID: devB, Hostname: "other", Project: projB, Metro: "da"},
	}
	s.Reservations = []emulator.ReservationSeed{
		{ID: cpEIP, Project: projA, Metro: "da", Tags: []string{cpTag}, Details: "control plane"},
	}
	return s
}

// start serves an emulator and returns an SDK client whose every exchange
// is checked against the OpenAPI spec.
func start(t *testing.T, seed *emulator.Seed, opts emulator.Options) (*emulator.Emulator, func(token string) *metalv1.APIClient) {
	t.Helper()
	if opts.RandSeed == 0 {
		opts.RandSeed = 1
	}
	e := emulator.StartForTest(t, seed, opts)
	return e, func(token string) *metalv1.APIClient {
		cfg := e.Configuration(token)
		specvalidate.Instrument(t, cfg, specvalidate.Options{})
		return metalv1.NewAPIClient(cfg)
	}
}

// responsesOnly is a client whose responses are checked against the spec
// but whose requests are not: for tests that send what the spec forbids
// on purpose.
func responsesOnly(t *testing.T, e *emulator.Emulator, token string) *metalv1.APIClient {
	t.Helper()
	cfg := e.Configuration(token)
	specvalidate.Instrument(t, cfg, specvalidate.Options{SkipRequests: true})
	return metalv1.NewAPIClient(cfg)
}

// wantStatus checks an SDK call's outcome.
func wantStatus(t *testing.T, resp *http.Response, err error, status int, msgPart string) {
	t.Helper()
	if resp == nil {
		t.Fatalf("no response (err %v), want %d", err, status)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d (err %v), want %d", resp.StatusCode, err, status)
	}
	if status >= 400 {
		var oe *metalv1.GenericOpenAPIError
		if !errors.As(err, &oe) {
			t.Fatalf("err %T %v, want a GenericOpenAPIError", err, err)
		}
		// The SDK decodes the Error body for the statuses the spec declares
		// for the operation; the message is in the raw body otherwise.
		if !strings.Contains(err.Error(), msgPart) && !strings.Contains(string(oe.Body()), msgPart) {
			t.Errorf("error %q (body %s) lacks %q", err, oe.Body(), msgPart)
		}
	} else if err != nil {
		t.Fatalf("unexpected error %v", err)
	}
}

func TestDevice(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)

	d, resp, err := c.DevicesApi.FindDeviceById(ctx, dev1).Include([]string{"ip_addresses.parent_block", "parent_block"}).Execute()
	wantStatus(t, resp, err, 200, "")
	if d.GetHostname() != "cp-0" || d.GetState() != metalv1.DEVICESTATE_ACTIVE || d.Plan.GetSlug() != "c3.small.x86" ||
		d.Metro.GetCode() != "da" || d.Facility.GetCode() != "da11" || !slices.Equal(d.Tags, []string{"control-plane"}) {
		t.Errorf("device %s/%s/%s/%s/%s/%v", d.GetHostname(), d.GetState(), d.Plan.GetSlug(), d.Metro.GetCode(), d.Facility.GetCode(), d.Tags)
	}
	if !strings.HasSuffix(d.Project.GetHref(), "/projects/"+projA) {
		t.Errorf("project href %q", d.Project.GetHref())
	}
	// A public IPv4 /31, a private IPv4 /31 in a /25 parent block, an IPv6 /127.
	var pub4, priv4, pub6 int
	for _, a := range d.IpAddresses {
		switch {
		case a.GetAddressFamily() == 4 && a.GetPublic():
			pub4++
			if a.GetCidr() != 31 || !a.GetManagement() {
				t.Errorf("public IPv4 %s/%d management %v", a.GetAddress(), a.GetCidr(), a.GetManagement())
			}
		case a.GetAddressFamily() == 4:
			priv4++
			pb := a.GetParentBlock()
			if a.GetCidr() != 31 || pb.GetCidr() != 25 || pb.GetNetwork() == "" || pb.GetNetmask() != "255.255.255.128" {
				t.Errorf("private IPv4 %s/%d parent %s/%d", a.GetAddress(), a.GetCidr(), pb.GetNetwork(), pb.GetCidr())
			}
			p := netip.MustParsePrefix(fmt.Sprintf("%s/%d", pb.GetNetwork(), pb.GetCidr()))
			if !p.Contains(netip.MustParseAddr(a.GetAddress())) {
				t.Errorf("%s is not in its parent block %s", a.GetAddress(), p)
			}
		case a.GetAddressFamily() == 6:
			pub6++
			if pb := a.GetParentBlock(); a.GetCidr() != 127 || pb.GetCidr() != 56 {
				t.Errorf("IPv6 %s/%d parent /%d", a.GetAddress(), a.GetCidr(), pb.GetCidr())
			}
		}
	}
	if pub4 != 1 || priv4 != 1 || pub6 != 1 {
		t.Errorf("addresses %d public IPv4, %d private IPv4, %d IPv6; want one each", pub4, priv4, pub6)
	}

	// Without include, parent blocks are links only.
	d, resp, err = c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
	wantStatus(t, resp, err, 200, "")
	for _, a := range d.IpAddresses {
		if pb := a.GetParentBlock(); pb.Network != nil || pb.GetHref() == "" {
			t.Errorf("parent block without include: %+v", pb)
		}
	}

	d, resp, err = c.DevicesApi.FindDeviceById(ctx, dev3).Execute()
	wantStatus(t, resp, err, 200, "")
	if d.GetState() != metalv1.DEVICESTATE_INACTIVE || d.Metro.GetCode() != "sv" {
		t.Errorf("dev3 %s in %s", d.GetState(), d.Metro.GetCode())
	}

	// Errors: 404 unknown and malformed IDs, 403 other project, 401 bad token.
	_, resp, err = c.DevicesApi.FindDeviceById(ctx, "d0000000-0000-4000-8000-00000000ffff").Execute()
	wantStatus(t, resp, err, 404, "Not found")
	// (The request itself breaks the spec: only the answer is checked.)
	_, resp, err = responsesOnly(t, e, tokAll).DevicesApi.FindDeviceById(ctx, "not-a-uuid").Execute()
	wantStatus(t, resp, err, 404, "Not found")
	_, resp, err = client(tokB).DevicesApi.FindDeviceById(ctx, dev1).Execute()
	wantStatus(t, resp, err, 403, "not authorized")
	_, resp, err = client("wrong").DevicesApi.FindDeviceById(ctx, dev1).Execute()
	wantStatus(t, resp, err, 401, "Invalid authentication token")

	// The emulator changes state for the CCM's instance tests.
	if err := e.SetDeviceState(dev1, "inactive"); err != nil {
		t.Fatal(err)
	}
	d, _, _ = c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
	if d.GetState() != metalv1.DEVICESTATE_INACTIVE {
		t.Errorf("state %s after SetDeviceState", d.GetState())
	}
	if err := e.DeleteDevice(dev1); err != nil {
		t.Fatal(err)
	}
	_, resp, err = c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
	wantStatus(t, resp, err, 404, "Not found")
}

func TestProjectDevices(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)

	// Project isolation: B's device is not in A, and the other way round.
	list, resp, err := c.DevicesApi.FindProjectDevices(ctx, projA).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(list.Devices) != 3 || list.Meta.GetTotal() != 3 || list.Meta.GetLastPage() != 1 || list.Meta.Next != nil {
		t.Fatalf("project A: %d devices, meta %+v", len(list.Devices), list.Meta)
	}
	for _, d := range list.Devices {
		if d.GetId() == devB {
			t.Error("project B's device is listed in project A")
		}
	}
	list, resp, err = client(tokB).DevicesApi.FindProjectDevices(ctx, projB).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(list.Devices) != 1 || list.Devices[0].GetId() != devB {
		t.Errorf("project B lists %d devices", len(list.Devices))
	}
	_, resp, err = client(tokB).DevicesApi.FindProjectDevices(ctx, projA).Execute()
	wantStatus(t, resp, err, 403, "not authorized")
	_, resp, err = c.DevicesApi.FindProjectDevices(ctx, "6a0e1a38-4c5d-4b1f-8f7e-2f3a4b5c6dff").Execute()
	wantStatus(t, resp, err, 404, "Not found")

	// The hostname filter matches substrings.
	list, resp, err = c.DevicesApi.FindProjectDevices(ctx, projA).Hostname("worker").Execute()
	wantStatus(t, resp, err, 200, "")
	if len(list.Devices) != 2 {
		t.Errorf("hostname=worker: %d devices", len(list.Devices))
	}
	list, _, _ = c.DevicesApi.FindProjectDevices(ctx, projA).Hostname("cp-0").Execute()
	if len(list.Devices) != 1 || list.Devices[0].GetId() != dev1 {
		t.Errorf("hostname=cp-0: %d devices", len(list.Devices))
	}
	list, _, _ = c.DevicesApi.FindProjectDevices(ctx, projA).Metro("sv").Execute()
	if len(list.Devices) != 1 || list.Devices[0].GetId() != dev3 {
		t.Errorf("metro=sv: %d devices", len(list.Devices))
	}
	list, _, _ = c.DevicesApi.FindProjectDevices(ctx, projA).Tag("control-plane").Execute()
	if len(list.Devices) != 1 || list.Devices[0].GetId() != dev1 {
		t.Errorf("tag=control-plane: %d devices", len(list.Devices))
	}

	// 2,000 more devices: the default page is 10, pages of 1,000 are
	// followed by ExecuteWithPagination past 1,000 items.
	start := time.Now()
	if _, err := e.AddDevices(2000, emulator.DeviceSeed{Project: projA, Hostname: "bulk-%04d", Metro: "da"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("added 2,000 devices in %v", time.Since(start))
	list, resp, err = c.DevicesApi.FindProjectDevices(ctx, projA).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(list.Devices) != 10 || list.Meta.GetTotal() != 2003 || list.Meta.GetLastPage() != 201 || list.Meta.Next == nil {
		t.Errorf("default page: %d devices, total %d, last page %d", len(list.Devices), list.Meta.GetTotal(), list.Meta.GetLastPage())
	}
	list, resp, err = c.DevicesApi.FindProjectDevices(ctx, projA).Page(3).PerPage(1000).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(list.Devices) != 3 || list.Meta.GetCurrentPage() != 3 || list.Meta.Next != nil || list.Meta.Previous == nil {
		t.Errorf("page 3 of 1000: %d devices, meta %+v", len(list.Devices), list.Meta)
	}
	e.ResetCounts()
	all, err := c.DevicesApi.FindProjectDevices(ctx, projA).PerPage(1000).ExecuteWithPagination()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, d := range all.Devices {
		ids[d.GetId()] = true
	}
	if len(all.Devices) != 2003 || len(ids) != 2003 {
		t.Errorf("paginated: %d devices, %d distinct", len(all.Devices), len(ids))
	}
	if n := e.Count(emulator.RouteListProjectDevices); n != 3 {
		t.Errorf("%d list requests for 3 pages", n)
	}
	list, _, _ = c.DevicesApi.FindProjectDevices(ctx, projA).Hostname("bulk-1999").Execute()
	if len(list.Devices) != 1 || list.Devices[0].GetHostname() != "bulk-1999" {
		t.Errorf("hostname=bulk-1999: %d devices", len(list.Devices))
	}
}

func TestBGP(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)

	// No config yet: 200 with an empty object.
	cfg, resp, err := c.BGPApi.FindBgpConfigByProject(ctx, projA).Execute()
	wantStatus(t, resp, err, 200, "")
	if cfg.GetId() != "" || cfg.Status != nil {
		t.Errorf("config before enabling: %+v", cfg)
	}
	// Sessions need BGP on the project.
	_, resp, err = c.DevicesApi.CreateBgpSession(ctx, dev1).BGPSessionInput(metalv1.BGPSessionInput{AddressFamily: metalv1.BGPSESSIONINPUTADDRESSFAMILY_IPV4.Ptr()}).Execute()
	wantStatus(t, resp, err, 422, "BGP is not enabled")

	// Invalid requests are 422 (they break the spec: only the answer is checked).
	resp, err = responsesOnly(t, e, tokAll).BGPApi.RequestBgpConfig(ctx, projA).BgpConfigRequestInput(metalv1.BgpConfigRequestInput{Asn: 65000, DeploymentType: "local", Md5: metalv1.PtrString("short")}).Execute()
	wantStatus(t, resp, err, 422, "Md5")

	resp, err = c.BGPApi.RequestBgpConfig(ctx, projA).BgpConfigRequestInput(metalv1.BgpConfigRequestInput{
		Asn: 65000, DeploymentType: "local", Md5: metalv1.PtrString("Secret12345"), UseCase: metalv1.PtrString("kubernetes-load-balancer"),
	}).Execute()
	wantStatus(t, resp, err, 204, "")
	cfg, resp, err = c.BGPApi.FindBgpConfigByProject(ctx, projA).Execute()
	wantStatus(t, resp, err, 200, "")
	if cfg.GetStatus() != metalv1.BGPCONFIGSTATUS_ENABLED || cfg.GetAsn() != 65000 || cfg.GetMd5() != "Secret12345" || cfg.GetMaxPrefix() != 10 || cfg.GetId() == "" {
		t.Errorf("config %+v", cfg)
	}
	resp, err = c.BGPApi.RequestBgpConfig(ctx, projA).BgpConfigRequestInput(metalv1.BgpConfigRequestInput{Asn: 65000, DeploymentType: "local"}).Execute()
	wantStatus(t, resp, err, 422, "already enabled")
	if got, ok := e.BGPConfig(projA); !ok || got.UseCase != "kubernetes-load-balancer" {
		t.Errorf("read back %+v %v", got, ok)
	}

	// Neighbours appear once a session exists.
	nb, resp, err := c.DevicesApi.GetBgpNeighborData(ctx, dev1).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(nb.BgpNeighbors) != 0 {
		t.Errorf("%d neighbours before a session", len(nb.BgpNeighbors))
	}
	in := metalv1.BGPSessionInput{AddressFamily: metalv1.BGPSESSIONINPUTADDRESSFAMILY_IPV4.Ptr()}
	ss, resp, err := c.DevicesApi.CreateBgpSession(ctx, dev1).BGPSessionInput(in).Execute()
	wantStatus(t, resp, err, 201, "")
	if ss.GetAddressFamily() != metalv1.BGPSESSIONADDRESSFAMILY_IPV4 || ss.GetId() == "" || !strings.HasSuffix(ss.Device.GetHref(), dev1) {
		t.Errorf("session %+v", ss)
	}
	// The second create is the 422 upstream CPEM swallows by message.
	_, resp, err = c.DevicesApi.CreateBgpSession(ctx, dev1).BGPSessionInput(in).Execute()
	wantStatus(t, resp, err, 422, "already has session")
	if !strings.HasPrefix(err.Error(), "422 Unprocessable Entity") {
		t.Errorf("SDK message %q", err)
	}
	sl, resp, err := c.DevicesApi.FindBgpSessions(ctx, dev1).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(sl.BgpSessions) != 1 {
		t.Errorf("%d sessions", len(sl.BgpSessions))
	}
	if got := e.BGPSessions(dev1); len(got) != 1 || got[0].AddressFamily != "ipv4" {
		t.Errorf("read back sessions %+v", got)
	}

	dv, _ := e.Device(dev1)
	priv, _ := dv.Address(emulator.TypePrivateIPv4)
	nb, resp, err = c.DevicesApi.GetBgpNeighborData(ctx, dev1).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(nb.BgpNeighbors) != 1 {
		t.Fatalf("%d neighbours", len(nb.BgpNeighbors))
	}
	n := nb.BgpNeighbors[0]
	if n.GetAddressFamily() != 4 || n.GetPeerAs() != 65530 || n.GetCustomerAs() != 65000 || n.GetCustomerIp() != priv.String() ||
		!slices.Equal(n.PeerIps, []string{"169.254.255.1", "169.254.255.2"}) || n.GetMd5Password() != "Secret12345" || !n.GetMd5Enabled() {
		t.Errorf("neighbour %+v (private IP %s)", n, priv)
	}

	// Seeded neighbour data wins.
	seed := testSeed()
	seed.Projects[0].BGP = &emulator.BGPConfigSeed{ASN: 64512}
	seed.Devices[1].BGPSessions = []string{"ipv4"}
	seed.Devices[1].BGPNeighbors = []emulator.BGPNeighborSeed{{AddressFamily: 4, PeerAS: 65100, PeerIPs: []string{"10.0.0.1"}}}
	_, client2 := start(t, seed, emulator.Options{})
	nb, resp, err = client2(tokAll).DevicesApi.GetBgpNeighborData(ctx, dev2).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(nb.BgpNeighbors) != 1 || nb.BgpNeighbors[0].GetPeerAs() != 65100 || nb.BgpNeighbors[0].GetCustomerAs() != 64512 ||
		!slices.Equal(nb.BgpNeighbors[0].PeerIps, []string{"10.0.0.1"}) {
		t.Errorf("seeded neighbours %+v", nb.BgpNeighbors)
	}

	// 403 and 404 on the BGP routes.
	_, resp, err = client(tokB).BGPApi.FindBgpConfigByProject(ctx, projA).Execute()
	wantStatus(t, resp, err, 403, "not authorized")
	_, resp, err = c.DevicesApi.GetBgpNeighborData(ctx, "d0000000-0000-4000-8000-00000000ffff").Execute()
	wantStatus(t, resp, err, 404, "Not found")
}

func TestIPReservations(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)

	tags := []string{"usage=cloud-provider-equinix-metal-auto", "service=abc=", "cluster=uid"}
	req := metalv1.IPReservationRequestInput{
		Type: "public_ipv4", Quantity: 1, Metro: metalv1.PtrString("da"), Tags: tags,
		Details:                metalv1.PtrString("Equinix Metal Kubernetes CCM auto-generated for Load Balancer"),
		FailOnApprovalRequired: metalv1.PtrBool(true),
	}
	res, resp, err := c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&req)).Execute()
	wantStatus(t, resp, err, 201, "")
	r := res.IPReservation
	if r == nil || r.GetCidr() != 32 || r.GetState() != "created" || r.GetType() != metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4 ||
		!slices.Equal(r.Tags, tags) || r.Metro.GetCode() != "da" || !r.GetPublic() || r.GetManagement() {
		t.Fatalf("reservation %+v", r)
	}
	if !netip.MustParsePrefix("198.18.0.0/18").Contains(netip.MustParseAddr(r.GetAddress())) {
		t.Errorf("address %s is not from da's block", r.GetAddress())
	}
	if got, ok := e.Reservation(r.GetId()); !ok || !got.HasTags(tags...) || got.Details != req.GetDetails() {
		t.Errorf("read back %+v", got)
	}

	// A facility reservation carries the facility and its metro.
	req2 := metalv1.IPReservationRequestInput{Type: "public_ipv4", Quantity: 4, Facility: metalv1.PtrString("sv15")}
	res, resp, err = c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&req2)).Execute()
	wantStatus(t, resp, err, 201, "")
	if res.IPReservation.GetCidr() != 30 || res.IPReservation.Facility.GetCode() != "sv15" || res.IPReservation.Metro.GetCode() != "sv" {
		t.Errorf("facility reservation %+v", res.IPReservation)
	}
	global := metalv1.IPReservationRequestInput{Type: "global_ipv4", Quantity: 1}
	res, resp, err = c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&global)).Execute()
	wantStatus(t, resp, err, 201, "")
	if !res.IPReservation.GetGlobalIp() || res.IPReservation.Metro != nil {
		t.Errorf("global reservation %+v", res.IPReservation)
	}

	// Invalid requests: 422 with the reason.
	for _, tc := range []struct {
		in   metalv1.IPReservationRequestInput
		want string
	}{
		{metalv1.IPReservationRequestInput{Type: "public_ipv4", Quantity: 3, Metro: metalv1.PtrString("da")}, "power of 2"},
		{metalv1.IPReservationRequestInput{Type: "public_ipv4", Quantity: 1, Metro: metalv1.PtrString("zz")}, "Metro zz not found"},
		{metalv1.IPReservationRequestInput{Type: "public_ipv4", Quantity: 1}, "Metro or facility is required"},
		{metalv1.IPReservationRequestInput{Type: "private_ipv4", Quantity: 1, Metro: metalv1.PtrString("da")}, "cannot be requested"},
		{metalv1.IPReservationRequestInput{Type: "global_ipv4", Quantity: 1, Metro: metalv1.PtrString("da")}, "cannot have a metro"},
	} {
		_, resp, err = c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&tc.in)).Execute()
		wantStatus(t, resp, err, 422, tc.want)
	}
	_, resp, err = client(tokRO).IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&req)).Execute()
	wantStatus(t, resp, err, 403, "read-only")
	_, resp, err = client(tokB).IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&req)).Execute()
	wantStatus(t, resp, err, 403, "not authorized")

	// Listing: management blocks are there too; types filters them.
	list, resp, err := c.IPAddressesApi.FindIPReservations(ctx, projA).Execute()
	wantStatus(t, resp, err, 200, "")
	// 3 devices: 3 public /31s, a /25 and a /56 per metro (da, sv): 4; plus 4 elastic.
	if got := len(list.IpAddresses); got != 3+4+4 {
		t.Errorf("%d reservations listed, want 11", got)
	}
	list, resp, err = c.IPAddressesApi.FindIPReservations(ctx, projA).Types([]metalv1.FindIPReservationsTypesParameterInner{"public_ipv4"}).Include([]string{"assignments"}).Execute()
	wantStatus(t, resp, err, 200, "")
	var elastic, mgmt int
	for _, it := range list.IpAddresses {
		r := it.IPReservation
		if r == nil || r.GetType() != "public_ipv4" {
			t.Fatalf("types=public_ipv4 listed %+v", it)
		}
		if r.GetManagement() {
			mgmt++
			if len(r.Assignments) != 1 || r.Assignments[0].GetAddress() == "" {
				t.Errorf("management /31 with include=assignments: %+v", r.Assignments)
			}
		} else {
			elastic++
		}
	}
	if elastic != 3 || mgmt != 3 {
		t.Errorf("types=public_ipv4: %d elastic, %d management", elastic, mgmt)
	}

	// Get and delete.
	got, resp, err := c.IPAddressesApi.FindIPAddressById(ctx, r.GetId()).Execute()
	wantStatus(t, resp, err, 200, "")
	if got.IPReservation == nil || got.IPReservation.GetId() != r.GetId() {
		t.Errorf("get %+v", got)
	}
	resp, err = client(tokB).IPAddressesApi.DeleteIPAddress(ctx, r.GetId()).Execute()
	wantStatus(t, resp, err, 403, "not authorized")
	resp, err = c.IPAddressesApi.DeleteIPAddress(ctx, r.GetId()).Execute()
	wantStatus(t, resp, err, 204, "")
	_, resp, err = c.IPAddressesApi.FindIPAddressById(ctx, r.GetId()).Execute()
	wantStatus(t, resp, err, 404, "Not found")
	resp, err = c.IPAddressesApi.DeleteIPAddress(ctx, r.GetId()).Execute()
	wantStatus(t, resp, err, 404, "Not found")
	if len(e.ElasticReservations(projA, tags...)) != 0 {
		t.Error("deleted reservation still read back")
	}
}

func TestIPReservationPagination(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)
	start := time.Now()
	if _, err := e.AddReservations(1500, emulator.ReservationSeed{Project: projA, Metro: "da"}, func(i int) []string {
		return []string{"usage=cloud-provider-equinix-metal-auto", fmt.Sprintf("service=%d", i), "cluster=uid"}
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("added 1,500 reservations in %v", time.Since(start))

	list, resp, err := c.IPAddressesApi.FindIPReservations(ctx, projA).Types([]metalv1.FindIPReservationsTypesParameterInner{"public_ipv4"}).Execute()
	wantStatus(t, resp, err, 200, "")
	// 1,500 + the control-plane EIP + 3 device /31s; 250 per page by default.
	if len(list.IpAddresses) != 250 || list.Meta.GetTotal() != 1504 || list.Meta.GetLastPage() != 7 {
		t.Errorf("first page: %d items, total %d, last page %d", len(list.IpAddresses), list.Meta.GetTotal(), list.Meta.GetLastPage())
	}
	e.ResetCounts()
	all, err := c.IPAddressesApi.FindIPReservations(ctx, projA).Types([]metalv1.FindIPReservationsTypesParameterInner{"public_ipv4"}).
		Include([]string{"assignments"}).PerPage(1000).ExecuteWithPagination()
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]bool{}
	tagged := 0
	for _, it := range all.IpAddresses {
		addrs[it.IPReservation.GetAddress()] = true
		if slices.Contains(it.IPReservation.Tags, "service=1499") {
			tagged++
		}
	}
	if len(all.IpAddresses) != 1504 || len(addrs) != 1504 || tagged != 1 {
		t.Errorf("paginated: %d items, %d distinct addresses, %d with service=1499", len(all.IpAddresses), len(addrs), tagged)
	}
	if n := e.Count(emulator.RouteListIPReservations); n != 2 {
		t.Errorf("%d list requests for 2 pages of 1000", n)
	}
	if got := e.ElasticReservations(projA, "service=42"); len(got) != 1 {
		t.Errorf("ElasticReservations by tag: %d", len(got))
	}
}

func TestPendingAndApproval(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	seed := testSeed()
	seed.Projects[0].ApprovalThreshold = 4
	e, client := start(t, seed, emulator.Options{ReservationPendingFor: time.Minute, Now: clock})
	c := client(tokAll)

	req := metalv1.IPReservationRequestInput{Type: "public_ipv4", Quantity: 1, Metro: metalv1.PtrString("da"), FailOnApprovalRequired: metalv1.PtrBool(true)}
	res, resp, err := c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&req)).Execute()
	wantStatus(t, resp, err, 201, "")
	id := res.IPReservation.GetId()
	if res.IPReservation.GetState() != "pending" {
		t.Errorf("state %q, want pending", res.IPReservation.GetState())
	}
	// A pending reservation cannot be assigned yet.
	_, resp, err = c.DevicesApi.CreateIPAssignment(ctx, dev1).IPAssignmentInput(metalv1.IPAssignmentInput{Address: res.IPReservation.GetAddress()}).Execute()
	wantStatus(t, resp, err, 422, "pending")
	now = now.Add(time.Minute)
	got, _, _ := c.IPAddressesApi.FindIPAddressById(ctx, id).Execute()
	if got.IPReservation.GetState() != "created" {
		t.Errorf("state after the delay %q", got.IPReservation.GetState())
	}

	// Above the threshold: 422 with fail_on_approval_required, else pending
	// until approved.
	big := metalv1.IPReservationRequestInput{Type: "public_ipv4", Quantity: 8, Metro: metalv1.PtrString("da"), FailOnApprovalRequired: metalv1.PtrBool(true)}
	_, resp, err = c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&big)).Execute()
	wantStatus(t, resp, err, 422, "requires approval")
	big.FailOnApprovalRequired = metalv1.PtrBool(false)
	res, resp, err = c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&big)).Execute()
	wantStatus(t, resp, err, 201, "")
	now = now.Add(time.Hour)
	if r, _ := e.Reservation(res.IPReservation.GetId()); r.State != "pending" {
		t.Errorf("state before approval %q", r.State)
	}
	if err := e.ApproveReservation(res.IPReservation.GetId()); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Reservation(res.IPReservation.GetId()); r.State != "created" {
		t.Errorf("state after approval %q", r.State)
	}
}

func TestElasticIPAssignment(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)
	cp, _ := e.Reservation(cpEIP)
	eip := cp.Prefix.Addr().String()

	// The control-plane flow: find the EIP by tag with its assignments,
	// assign it, move it.
	list, resp, err := c.IPAddressesApi.FindIPReservations(ctx, projA).Include([]string{"assignments"}).Execute()
	wantStatus(t, resp, err, 200, "")
	var found *metalv1.IPReservation
	for _, it := range list.IpAddresses {
		if slices.Contains(it.IPReservation.Tags, cpTag) {
			found = it.IPReservation
		}
	}
	if found == nil || len(found.Assignments) != 0 || found.GetAddress() != eip {
		t.Fatalf("control-plane EIP %+v", found)
	}

	a, resp, err := c.DevicesApi.CreateIPAssignment(ctx, dev1).IPAssignmentInput(metalv1.IPAssignmentInput{Address: eip}).Execute()
	wantStatus(t, resp, err, 201, "")
	if a.GetAddress() != eip || a.GetCidr() != 32 || a.GetManagement() || !strings.HasSuffix(a.AssignedTo.GetHref(), dev1) || a.GetType() != metalv1.IPASSIGNMENTTYPE_IP_ASSIGNMENT {
		t.Errorf("assignment %+v", a)
	}
	// A second assignment of the same address, another metro, a foreign
	// address: 422.
	_, resp, err = c.DevicesApi.CreateIPAssignment(ctx, dev2).IPAssignmentInput(metalv1.IPAssignmentInput{Address: eip}).Execute()
	wantStatus(t, resp, err, 422, "already assigned")
	_, resp, err = c.DevicesApi.CreateIPAssignment(ctx, dev3).IPAssignmentInput(metalv1.IPAssignmentInput{Address: eip}).Execute()
	wantStatus(t, resp, err, 422, "metro")
	_, resp, err = c.DevicesApi.CreateIPAssignment(ctx, dev1).IPAssignmentInput(metalv1.IPAssignmentInput{Address: "192.0.2.1"}).Execute()
	wantStatus(t, resp, err, 422, "not reserved for the project")
	_, resp, err = client(tokB).DevicesApi.CreateIPAssignment(ctx, devB).IPAssignmentInput(metalv1.IPAssignmentInput{Address: eip}).Execute()
	wantStatus(t, resp, err, 422, "not reserved for the project")

	// Listed on the device, in the device, and in the reservation.
	ips, resp, err := c.DevicesApi.FindIPAssignments(ctx, dev1).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(ips.IpAddresses) != 4 || ips.IpAddresses[3].GetAddress() != eip {
		t.Errorf("device IPs %d, last %s", len(ips.IpAddresses), ips.IpAddresses[len(ips.IpAddresses)-1].GetAddress())
	}
	d, _, _ := c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
	if len(d.IpAddresses) != 4 {
		t.Errorf("device has %d addresses", len(d.IpAddresses))
	}
	got, resp, err := c.IPAddressesApi.FindIPAddressById(ctx, cpEIP).Include([]string{"assignments"}).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(got.IPReservation.Assignments) != 1 || got.IPReservation.Assignments[0].GetId() != a.GetId() {
		t.Errorf("reservation assignments %+v", got.IPReservation.Assignments)
	}
	got, resp, err = c.IPAddressesApi.FindIPAddressById(ctx, a.GetId()).Include([]string{"parent_block"}).Execute()
	wantStatus(t, resp, err, 200, "")
	if got.IPAssignment == nil || got.IPAssignment.ParentBlock.GetNetwork() != eip {
		t.Errorf("assignment by id %+v", got)
	}
	if r, _ := e.Reservation(cpEIP); len(r.Assignments) != 1 || r.Assignments[0].Device != dev1 {
		t.Errorf("read back %+v", r.Assignments)
	}

	// The reservation cannot go while assigned; management addresses stay.
	resp, err = c.IPAddressesApi.DeleteIPAddress(ctx, cpEIP).Execute()
	wantStatus(t, resp, err, 422, "unassign them first")
	resp, err = c.IPAddressesApi.DeleteIPAddress(ctx, ips.IpAddresses[0].GetId()).Execute()
	wantStatus(t, resp, err, 422, "Management")

	// Move: unassign by the assignment's ID, assign elsewhere.
	resp, err = c.IPAddressesApi.DeleteIPAddress(ctx, a.GetId()).Execute()
	wantStatus(t, resp, err, 204, "")
	_, resp, err = c.DevicesApi.CreateIPAssignment(ctx, dev2).IPAssignmentInput(metalv1.IPAssignmentInput{Address: eip + "/32"}).Execute()
	wantStatus(t, resp, err, 201, "")
	if r, _ := e.Reservation(cpEIP); len(r.Assignments) != 1 || r.Assignments[0].Device != dev2 {
		t.Errorf("after the move %+v", r.Assignments)
	}
	// Deleting the device drops its EIP assignment.
	if err := e.DeleteDevice(dev2); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Reservation(cpEIP); len(r.Assignments) != 0 {
		t.Errorf("assignments of a deleted device remain: %+v", r.Assignments)
	}
}

func TestSeededAssignmentAndAddresses(t *testing.T) {
	seed := testSeed()
	seed.Devices[0].PublicIPv4 = "198.18.0.101"
	seed.Devices[0].PrivateIPv4 = "10.1.0.7"
	seed.Reservations[0].Address = "198.18.0.200"
	seed.Reservations[0].AssignedTo = []string{dev1}
	e, client := start(t, seed, emulator.Options{})
	d, _ := e.Device(dev1)
	if a, _ := d.Address(emulator.TypePublicIPv4); a.String() != "198.18.0.101" {
		t.Errorf("public %s", a)
	}
	if a, _ := d.Address(emulator.TypePrivateIPv4); a.String() != "10.1.0.7" {
		t.Errorf("private %s", a)
	}
	got, resp, err := client(tokAll).IPAddressesApi.FindIPAddressById(ctx, cpEIP).Include([]string{"assignments"}).Execute()
	wantStatus(t, resp, err, 200, "")
	if got.IPReservation.GetAddress() != "198.18.0.200" || len(got.IPReservation.Assignments) != 1 {
		t.Errorf("seeded assignment %+v", got.IPReservation)
	}
	// Other devices never get the seeded addresses.
	devs, err := e.AddDevices(300, emulator.DeviceSeed{Project: projA, Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		for _, a := range d.Addresses {
			if a.Prefix.Contains(netip.MustParseAddr("198.18.0.101")) || a.Prefix.Contains(netip.MustParseAddr("10.1.0.7")) ||
				a.Prefix.Contains(netip.MustParseAddr("198.18.0.200")) {
				t.Fatalf("%s got seeded address block %s", d.Hostname, a.Prefix)
			}
		}
	}

	// Bad seeds are refused with a reason.
	for _, tc := range []struct {
		mod  func(*emulator.Seed)
		want string
	}{
		{func(s *emulator.Seed) { s.Devices[0].Metro = "zz" }, "Metro zz not found"},
		{func(s *emulator.Seed) { s.Devices[1].ID = dev1 }, "used twice"},
		{func(s *emulator.Seed) { s.Devices[0].ID = "x" }, "not a UUID"},
		{func(s *emulator.Seed) { s.Devices[0].Project = "" }, "project is required"},
		{func(s *emulator.Seed) { s.Reservations[0].Address = s.Devices[0].PublicIPv4 }, "already in use"},
	} {
		s := testSeed()
		s.Devices[0].PublicIPv4 = "198.18.0.101"
		tc.mod(s)
		if _, err := emulator.New(s, emulator.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("seed error %v, want %q", err, tc.want)
		}
	}
}

func TestLocationsAndProject(t *testing.T) {
	_, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)
	metros, resp, err := c.MetrosApi.FindMetros(ctx).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(metros.Metros) != 4 || metros.Metros[0].GetCode() != "da" {
		t.Errorf("metros %+v", metros.Metros)
	}
	m, resp, err := c.MetrosApi.GetMetro(ctx, metros.Metros[1].GetId()).Execute()
	wantStatus(t, resp, err, 200, "")
	if m.GetCode() != "sv" {
		t.Errorf("metro %+v", m)
	}
	facs, resp, err := c.FacilitiesApi.FindFacilities(ctx).Execute()
	wantStatus(t, resp, err, 200, "")
	if len(facs.Facilities) != 4 || facs.Facilities[0].Metro.GetCode() != "da" {
		t.Errorf("facilities %+v", facs.Facilities)
	}
	p, resp, err := c.ProjectsApi.FindProjectById(ctx, projA).Execute()
	wantStatus(t, resp, err, 200, "")
	if p.GetName() != "a" {
		t.Errorf("project %+v", p)
	}
	_, resp, err = client(tokB).ProjectsApi.FindProjectById(ctx, projA).Execute()
	wantStatus(t, resp, err, 403, "not authorized")
}
