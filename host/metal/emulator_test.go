package metal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// startEmulator serves an emulator that accepts fakeKey for its default
// project, and a Client of it.
func startEmulator(t testing.TB, mods ...func(*Options)) (*emulator.Emulator, *Client) {
	t.Helper()
	seed := emulator.DefaultSeed()
	seed.Tokens = []emulator.TokenSeed{{Token: fakeKey}}
	seed.Projects[0].BGP = &emulator.BGPConfigSeed{}
	e := emulator.StartForTest(t, seed, emulator.Options{RandSeed: 1})
	o := Options{
		BaseURL:      e.URL(),
		APIKey:       config.Secret(fakeKey),
		ProjectID:    emulator.DefaultProjectID,
		Timeout:      10 * time.Second,
		Retries:      3,
		QPS:          1000,
		Burst:        1000,
		RetryWaitMin: 5 * time.Millisecond,
		RetryWaitMax: 2 * time.Second,
	}
	for _, m := range mods {
		m(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

func svcTags(i int) []string {
	return []string{"usage=cloud-provider-equinix-metal-auto", fmt.Sprintf("service=svc-%04d", i), "cluster=c1"}
}

// seedLargeProject adds 2,000 devices and 1,500 tagged Service EIPs (with
// the devices' management blocks the project holds 3,500 public IPv4
// reservations: four pages of 1,000).
func seedLargeProject(t testing.TB, e *emulator.Emulator) {
	t.Helper()
	if _, err := e.AddDevices(2000, emulator.DeviceSeed{Hostname: "node-%04d", Metro: "da"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddReservations(1500, emulator.ReservationSeed{Metro: "da"}, svcTags); err != nil {
		t.Fatal(err)
	}
}

func TestEmulatorLargeProjectLookups(t *testing.T) {
	e, c := startEmulator(t)
	seedLargeProject(t, e)
	ctx := context.Background()
	devs := e.Devices(emulator.DefaultProjectID)

	// Lookups of the last items need the pages past 1,000.
	last := devs[len(devs)-1]
	d, err := c.DeviceByHostname(ctx, last.Hostname)
	if err != nil || d.GetId() != last.ID {
		t.Fatalf("DeviceByHostname(%s) = %v, %v", last.Hostname, d, err)
	}
	if n := e.Count(emulator.RouteListProjectDevices); n != 2 {
		t.Errorf("device cache filled with %d listing calls, want 2 pages", n)
	}
	rs, err := c.ReservationsWithTags(ctx, svcTags(1499)...)
	if err != nil || len(rs) != 1 {
		t.Fatalf("ReservationsWithTags(svc 1499) = %v, %v", rs, err)
	}
	want := e.ElasticReservations(emulator.DefaultProjectID, svcTags(1499)...)
	if rs[0].GetId() != want[0].ID {
		t.Errorf("found %s, the emulator has %s", rs[0].GetId(), want[0].ID)
	}
	listings := e.Count(emulator.RouteListIPReservations)
	if listings < 2 {
		t.Errorf("reservation cache filled with %d listing calls; pagination past 1,000 not exercised", listings)
	}

	// Private parent block is there (network-4-private annotation).
	var private bool
	for _, a := range d.IpAddresses {
		if !a.GetPublic() && a.GetAddressFamily() == 4 && a.ParentBlock != nil && a.ParentBlock.GetNetwork() != "" && a.ParentBlock.GetCidr() != 0 {
			private = true
		}
	}
	if !private {
		t.Error("the cached device has no private IPv4 with its parent block")
	}

	// Every device and every Service EIP, from the cache: no call.
	e.ResetCounts()
	for _, dv := range devs {
		if got, err := c.Device(ctx, dv.ID); err != nil || got.GetHostname() != dv.Hostname {
			t.Fatalf("Device(%s) = %v, %v", dv.ID, got, err)
		}
	}
	for i := range 1500 {
		if rs, err := c.ReservationsWithTags(ctx, svcTags(i)...); err != nil || len(rs) != 1 {
			t.Fatalf("ReservationsWithTags(svc %d) = %d results, %v", i, len(rs), err)
		}
	}
	if n := e.TotalRequests(); n != 0 {
		t.Errorf("cached lookups made %d API calls: %v", n, e.Counts())
	}
}

// Steady state: 100 Services × 10 nodes re-synced makes no call; one node
// joining costs at most 3.
func TestEmulatorCallBudgets(t *testing.T) {
	e, c := startEmulator(t)
	ctx := context.Background()
	nodes, err := e.AddDevices(10, emulator.DeviceSeed{Hostname: "worker-%d", Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddReservations(100, emulator.ReservationSeed{Metro: "da"}, svcTags); err != nil {
		t.Fatal(err)
	}
	// What one sync of every Service does, as far as Equinix is concerned.
	syncAll := func() {
		t.Helper()
		for i := range 100 {
			if rs, err := c.ReservationsWithTags(ctx, svcTags(i)...); err != nil || len(rs) != 1 {
				t.Fatalf("ReservationsWithTags(%d) = %v, %v", i, rs, err)
			}
			for _, n := range nodes {
				if _, err := c.Device(ctx, n.ID); err != nil {
					t.Fatal(err)
				}
				if err := c.EnsureDeviceBGPSession(ctx, n.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	syncAll() // warms the caches
	e.ResetCounts()
	syncAll()
	if n := e.TotalRequests(); n != 0 {
		t.Errorf("steady-state resync made %d calls: %v", n, e.Counts())
	}

	// A node joins: find its device by name, give it a BGP session, read
	// its neighbours. The 100 Services' syncs after that cost nothing more.
	joined, err := e.AddDevice(emulator.DeviceSeed{Hostname: "worker-new", Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.DeviceByHostname(ctx, "worker-new")
	if err != nil || d.GetId() != joined.ID {
		t.Fatalf("DeviceByHostname = %v, %v", d, err)
	}
	if err := c.EnsureDeviceBGPSession(ctx, d.GetId()); err != nil {
		t.Fatal(err)
	}
	neighbors, err := c.DeviceBGPNeighbors(ctx, d.GetId())
	if err != nil || len(neighbors) == 0 {
		t.Fatalf("DeviceBGPNeighbors = %v, %v", neighbors, err)
	}
	for i := range 100 {
		if _, err := c.ReservationsWithTags(ctx, svcTags(i)...); err != nil {
			t.Fatal(err)
		}
		if err := c.EnsureDeviceBGPSession(ctx, d.GetId()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Device(ctx, d.GetId()); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.TotalRequests(); n > 3 {
		t.Errorf("a node joining cost %d calls, want ≤ 3: %v", n, e.Counts())
	}
	if got := e.BGPSessions(joined.ID); len(got) != 1 {
		t.Errorf("the emulator shows %d sessions on the new node, want 1", len(got))
	}
}

func TestEmulatorExistingBGPSession(t *testing.T) {
	e, c := startEmulator(t)
	dv, err := e.AddDevice(emulator.DeviceSeed{Hostname: "has-session", Metro: "da", BGPSessions: []string{"ipv4"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureDeviceBGPSession(context.Background(), dv.ID); err != nil {
		t.Fatalf("EnsureDeviceBGPSession on a device that has one: %v", err)
	}
	if n := e.Count(emulator.RouteCreateBGPSession); n != 1 {
		t.Errorf("%d POSTs, want 1", n)
	}
	if got := e.BGPSessions(dv.ID); len(got) != 1 {
		t.Errorf("%d sessions, want 1", len(got))
	}
}

func TestEmulator429WithRetryAfterIsRetried(t *testing.T) {
	e, c := startEmulator(t)
	dv, err := e.AddDevice(emulator.DeviceSeed{Hostname: "n", Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	e.FailNext(emulator.RouteGetDevice, 1, emulator.Failure{Status: 429, RetryAfter: emulator.Duration(time.Second)})
	if _, err := c.DeviceFresh(context.Background(), dv.ID); err != nil {
		t.Fatalf("DeviceFresh after a 429: %v", err)
	}
	st := e.Stats()[emulator.RouteGetDevice]
	if st.Requests != 2 || st.Statuses[429] != 1 || st.Statuses[200] != 1 {
		t.Errorf("GET /devices/{id}: %+v, want one 429 then one 200", st)
	}
}

func TestEmulatorPOSTIsNeverBlindlyRetried(t *testing.T) {
	for _, f := range []emulator.Failure{{Status: 503}, {Status: 500}, {Status: 429, RetryAfter: emulator.Duration(time.Second)}, {Reset: true}} {
		t.Run(fmt.Sprintf("status %d reset %v", f.Status, f.Reset), func(t *testing.T) {
			e, c := startEmulator(t)
			dv, err := e.AddDevice(emulator.DeviceSeed{Hostname: "n", Metro: "da"})
			if err != nil {
				t.Fatal(err)
			}
			eip, err := e.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: []string{"cp"}})
			if err != nil {
				t.Fatal(err)
			}
			e.FailNext(emulator.RouteAssignIP, 1, f)
			if _, err := c.AssignIP(context.Background(), dv.ID, eip.Prefix.Addr().String()); err == nil {
				t.Error("AssignIP succeeded through a failure")
			}
			if n := e.Count(emulator.RouteAssignIP); n != 1 {
				t.Errorf("POST /devices/{id}/ips sent %d times, want 1", n)
			}
		})
	}
}

// The reservation request is retried, but only after looking up its tags.
func TestEmulatorRequestReservationRetriesSafely(t *testing.T) {
	e, c := startEmulator(t)
	ctx := context.Background()
	e.FailNext(emulator.RouteRequestIPReservation, 1, emulator.Failure{Status: 502})
	tags := svcTags(7)
	r, err := c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags})
	if err != nil {
		t.Fatalf("RequestReservation: %v", err)
	}
	if got := e.ElasticReservations(emulator.DefaultProjectID, tags...); len(got) != 1 || got[0].ID != r.GetId() {
		t.Errorf("the emulator holds %v, want exactly the returned %s", got, r.GetId())
	}
	if posts, lists := e.Count(emulator.RouteRequestIPReservation), e.Count(emulator.RouteListIPReservations); posts != 2 || lists != 2 {
		t.Errorf("%d POSTs and %d listings, want 2 and 2 (a lookup before each POST)", posts, lists)
	}
	// A second request for the same Service is answered without a POST.
	e.ResetCounts()
	r2, err := c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags})
	if err != nil || r2.GetId() != r.GetId() {
		t.Fatalf("second RequestReservation = %v, %v", r2, err)
	}
	if n := e.Count(emulator.RouteRequestIPReservation); n != 0 {
		t.Errorf("%d POSTs for an existing reservation", n)
	}
	// And the cache has it without another listing.
	e.ResetCounts()
	if rs, err := c.ReservationsWithTags(ctx, tags...); err != nil || len(rs) != 1 {
		t.Fatalf("ReservationsWithTags = %v, %v", rs, err)
	}
	if n := e.TotalRequests(); n != 0 {
		t.Errorf("%d calls after our own create", n)
	}
}

func TestEmulatorTransportErrorsAreErrors(t *testing.T) {
	e, c := startEmulator(t, func(o *Options) { o.Retries = 1 })
	dv, err := e.AddDevice(emulator.DeviceSeed{Hostname: "n", Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	e.SetFault(emulator.AllRoutes, emulator.Fault{ResetShare: 1})
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["DeviceFresh"] = c.DeviceFresh(ctx, dv.ID)
	_, checks["DeviceByHostname"] = c.DeviceByHostname(ctx, "n")
	checks["EnsureDeviceBGPSession"] = c.EnsureDeviceBGPSession(ctx, dv.ID)
	_, checks["DeviceBGPNeighbors"] = c.DeviceBGPNeighbors(ctx, dv.ID)
	_, checks["ProjectBGPConfig"] = c.ProjectBGPConfig(ctx)
	_, checks["ReservationsWithTags"] = c.ReservationsWithTags(ctx, "x")
	_, checks["RequestReservation"] = c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: []string{"x"}})
	checks["DeleteIP"] = c.DeleteIP(ctx, "00000000-0000-0000-0000-000000000000")
	_, checks["AssignIP"] = c.AssignIP(ctx, dv.ID, "198.51.100.1")
	for name, err := range checks {
		var e *callError
		if err == nil || !errors.As(err, &e) || e.StatusCode != 0 || IsNotFound(err) {
			t.Errorf("%s: %v, want an *callError without status", name, err)
		}
		if err != nil && strings.Contains(err.Error(), fakeKey) {
			t.Errorf("%s: the key is in %q", name, err)
		}
	}
}

func TestEmulatorWrongKeyErrorIsReadable(t *testing.T) {
	e, _ := startEmulator(t)
	c, err := New(Options{BaseURL: e.URL(), APIKey: "WRONG-" + fakeKey, ProjectID: emulator.DefaultProjectID})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ReservationsWithTags(context.Background(), "x")
	var ae *callError
	if !errors.As(err, &ae) || ae.StatusCode != 401 || !strings.Contains(err.Error(), "METAL_API_KEY") {
		t.Errorf("error = %v, want a 401 that says which setting to fix", err)
	}
	if strings.Contains(err.Error(), fakeKey) {
		t.Errorf("the key is in %q", err)
	}
}

func TestEmulatorControlPlaneFailoverCalls(t *testing.T) {
	e, c := startEmulator(t)
	ctx := context.Background()
	devs, err := e.AddDevices(2, emulator.DeviceSeed{Hostname: "cp-%d", Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	eip, err := e.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: []string{"cluster-api-provider-packet:cluster-id:c1"}, AssignedTo: []string{devs[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.ReservationsWithTagsFresh(ctx, "cluster-api-provider-packet:cluster-id:c1")
	if err != nil || len(rs) != 1 || len(rs[0].Assignments) != 1 {
		t.Fatalf("fresh lookup = %+v, %v", rs, err)
	}
	if err := c.RefreshDevices(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Device(ctx, devs[0].ID); !slices.ContainsFunc(d.IpAddresses, func(a metalv1.IPAssignment) bool {
		return a.GetAddress() == eip.Prefix.Addr().String()
	}) {
		t.Fatal("the first holder's device does not list the EIP")
	}
	// Move the EIP: unassign, assign elsewhere; the caches follow.
	if err := c.DeleteIP(ctx, rs[0].Assignments[0].GetId()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AssignIP(ctx, devs[1].ID, eip.Prefix.Addr().String()); err != nil {
		t.Fatal(err)
	}
	e.ResetCounts()
	rs, err = c.ReservationsWithTags(ctx, "cluster-api-provider-packet:cluster-id:c1")
	if err != nil || len(rs) != 1 || len(rs[0].Assignments) != 1 {
		t.Fatalf("cached lookup after the move = %+v, %v", rs, err)
	}
	if !strings.HasSuffix(rs[0].Assignments[0].AssignedTo.GetHref(), devs[1].ID) {
		t.Errorf("cached assignment points at %s, want device %s", rs[0].Assignments[0].AssignedTo.GetHref(), devs[1].ID)
	}
	holds := func(id string) bool {
		d, err := c.Device(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range d.IpAddresses {
			if a.GetAddress() == eip.Prefix.Addr().String() {
				return true
			}
		}
		return false
	}
	if holds(devs[0].ID) || !holds(devs[1].ID) {
		t.Errorf("cached devices: old holder has the EIP %v, new holder has it %v; want false, true", holds(devs[0].ID), holds(devs[1].ID))
	}
	if n := e.TotalRequests(); n != 0 {
		t.Errorf("%d calls for the cached lookups", n)
	}
	// The emulator agrees.
	r, _ := e.Reservation(rs[0].GetId())
	if len(r.Assignments) != 1 || r.Assignments[0].Device != devs[1].ID {
		t.Errorf("emulator assignments: %+v", r.Assignments)
	}
}

// A 429 on the reservation POST is a refusal (nothing was created): the
// next attempt waits for Retry-After, looks up the tags again, and posts.
func TestEmulatorRequestReservationAfter429(t *testing.T) {
	e, c := startEmulator(t)
	e.FailNext(emulator.RouteRequestIPReservation, 1, emulator.Failure{Status: 429, RetryAfter: emulator.Duration(time.Second)})
	start := time.Now()
	r, err := c.RequestReservation(context.Background(), ReservationRequest{Location: location.Location{Metro: "da"}, Tags: svcTags(3)})
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("posted again after %v, before Retry-After: 1", waited)
	}
	if got := e.ElasticReservations(emulator.DefaultProjectID, svcTags(3)...); len(got) != 1 || got[0].ID != r.GetId() {
		t.Errorf("emulator holds %v", got)
	}
	if n := e.Count(emulator.RouteRequestIPReservation); n != 2 {
		t.Errorf("%d POSTs, want 2", n)
	}
}
