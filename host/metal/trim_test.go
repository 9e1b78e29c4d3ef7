package metal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

func TestDropNeighbourRoutes(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "routes dropped, the rest kept",
			in:   `{"bgp_neighbors":[{"address_family":4,"md5_password":"pw","peer_ips":["169.254.255.1"],"routes_in":[{"route":"147.75.9.9/32","exact":true}],"routes_out":[]}],"meta":1}`,
			want: `{"bgp_neighbors":[{"address_family":4,"md5_password":"pw","peer_ips":["169.254.255.1"]}],"meta":1}`},
		{name: "no neighbours", in: `{"bgp_neighbors":[]}`, want: `{"bgp_neighbors":[]}`},
		{name: "no bgp_neighbors member", in: `{"other":true}`, want: `{"other":true}`},
		{name: "not JSON", in: `<html>`, wantErr: true},
		{name: "neighbours not a list", in: `{"bgp_neighbors":{}}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dropNeighbourRoutes([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// neighboursWithRoutes answers like the API does for a project with n
// Elastic IPs: every one of them in routes_in.
func neighboursWithRoutes(n int) http.HandlerFunc {
	routes := make([]map[string]any, n)
	for i := range routes {
		routes[i] = map[string]any{"route": fmt.Sprintf("147.75.%d.%d/32", i/256%256, i%256), "exact": true}
	}
	body := map[string]any{"bgp_neighbors": []map[string]any{{
		"address_family": 4, "customer_as": 65000, "customer_ip": "10.0.0.2", "md5_password": "not-logged",
		"peer_as": 65530, "peer_ips": []string{"169.254.255.1", "169.254.255.2"},
		"routes_in": routes, "routes_out": []any{},
	}}}
	// Encoded once, so that a benchmark measures the client alone.
	enc, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(enc)
	}
}

// What the CCM reads arrives; the routes, which it never reads, do not.
// A trimmer on one request leaves every other answer alone.
func TestDeviceBGPNeighborsWithoutRoutes(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /devices/d1/bgp/neighbors", neighboursWithRoutes(10000))
	c := f.client()
	n, err := c.DeviceBGPNeighbors(context.Background(), "d1")
	if err != nil {
		t.Fatal(err)
	}
	if len(n) != 1 || n[0].GetPeerAs() != 65530 || len(n[0].PeerIps) != 2 || n[0].GetCustomerIp() != "10.0.0.2" ||
		n[0].GetCustomerAs() != 65000 || n[0].GetMd5Password() != "not-logged" {
		t.Errorf("neighbour data lost in the trim: %+v", n)
	}
	if len(n[0].RoutesIn) != 0 || len(n[0].RoutesOut) != 0 {
		t.Errorf("%d routes in and %d out reached the SDK's decoding, want none", len(n[0].RoutesIn), len(n[0].RoutesOut))
	}
	f.handle("GET /devices/d1/bgp/sessions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"bgp_sessions": []map[string]any{{"id": "s1", "address_family": "ipv4"}}})
	})
	s, err := c.DeviceBGPSessions(context.Background(), "d1")
	if err != nil || len(s) != 1 || s[0].GetId() != "s1" {
		t.Errorf("DeviceBGPSessions = %+v, %v", s, err)
	}
}

// BenchmarkDeviceBGPNeighbors10kRoutes is one neighbours read in a project
// with 10,000 Elastic IPs; B/op is what the trim saves per node and refresh.
func BenchmarkDeviceBGPNeighbors10kRoutes(b *testing.B) {
	f := newFakeAPI(b)
	f.handle("GET /devices/d1/bgp/neighbors", neighboursWithRoutes(10000))
	c := f.client()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.DeviceBGPNeighbors(context.Background(), "d1"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTrimReservationList(t *testing.T) {
	full := `{"id":"r1","href":"/ips/r1","type":"public_ipv4","state":"created","tags":["a=b"],"details":"d","created_at":"2026-01-01T00:00:00Z",` +
		`"address":"147.75.1.1","address_family":4,"cidr":32,"network":"147.75.1.1","public":true,"management":false,` +
		`"netmask":"255.255.255.255","gateway":"147.75.1.1","manageable":true,"addon":true,"bill":true,"enabled":true,"global_ip":false,` +
		`"available":"/ips/r1/available","customdata":{"x":1},"project":{"href":"/projects/p"},"project_lite":{"href":"/projects/p"},` +
		`"metro":{"id":"m","code":"da","name":"Dallas","country":"US"},` +
		`"facility":{"id":"f","code":"da11","name":"Dallas 11","features":["baremetal"],"ip_ranges":["147.75.0.0/16"],"metro":{"id":"m"}},` +
		`"assignments":[{"id":"a1","href":"/ips/a1","state":"assigned","address":"147.75.1.1","address_family":4,"cidr":32,"network":"147.75.1.1",` +
		`"public":true,"management":false,"assigned_to":{"href":"/devices/d1"},"metro":{"id":"m","code":"da","name":"Dallas"},` +
		`"parent_block":{"href":"/ips/r1","network":"147.75.1.1"},"created_at":"2026-01-01T00:00:00Z","gateway":"x","netmask":"y","enabled":true}]}`
	trimmed := `{"address":"147.75.1.1","address_family":4,` +
		`"assignments":[{"address":"147.75.1.1","address_family":4,"assigned_to":{"href":"/devices/d1"},"cidr":32,"href":"/ips/a1","id":"a1",` +
		`"management":false,"metro":{"code":"da","id":"m"},"network":"147.75.1.1","public":true,"state":"assigned"}],` +
		`"cidr":32,"created_at":"2026-01-01T00:00:00Z","details":"d","facility":{"code":"da11","id":"f"},"href":"/ips/r1","id":"r1",` +
		`"management":false,"metro":{"code":"da","id":"m"},"network":"147.75.1.1","public":true,"state":"created","tags":["a=b"],"type":"public_ipv4"}`
	vrf := `{"id":"v1","type":"vrf","vrf":{"id":"x"},"project":{"href":"/projects/p"}}`
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "what the CCM reads is kept, the rest dropped", in: `{"ip_addresses":[` + full + `],"meta":{"total":1}}`,
			want: `{"ip_addresses":[` + trimmed + `],"meta":{"total":1}}`},
		{name: "a VRF reservation is left whole", in: `{"ip_addresses":[` + vrf + `]}`, want: `{"ip_addresses":[` + vrf + `]}`},
		{name: "not an object is left as it is", in: `{"ip_addresses":[1,null]}`, want: `{"ip_addresses":[1,null]}`},
		{name: "no ip_addresses member", in: `{"other":true}`, want: `{"other":true}`},
		{name: "not JSON", in: `<html>`, wantErr: true},
		{name: "ip_addresses not a list is left to the SDK", in: `{"ip_addresses":{}}`, want: `{"ip_addresses":{}}`},
		{name: "a list is not an object", in: `[]`, wantErr: true},
		{name: "cut short", in: `{"ip_addresses":[{"type":"public_ipv4","id":`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := trimReservationList([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			// Compare as values: the trim re-encodes, which sorts members.
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// emulatorReservations is one page of n reservations as the emulator
// renders them (each assigned to a device), captured once, so that a
// benchmark measures the client alone.
func emulatorReservations(tb testing.TB, n int) []byte {
	e, _ := startEmulator(tb)
	devs, err := e.AddDevices(1, emulator.DeviceSeed{Hostname: "node-%04d", Metro: "da"})
	if err != nil {
		tb.Fatal(err)
	}
	rs, err := e.AddReservations(n, emulator.ReservationSeed{Metro: "da", Facility: "da11", Details: "x"}, svcTags)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range rs {
		if _, err := e.AssignIP(devs[0].ID, r.Prefix.Addr().String()); err != nil {
			tb.Fatal(err)
		}
	}
	return emulatorGet(tb, e, "/projects/"+emulator.DefaultProjectID+"/ips?types=public_ipv4&include=assignments&per_page=10000")
}

// emulatorDevices is a listing of n devices as the emulator renders it.
func emulatorDevices(tb testing.TB, n int) []byte {
	e, _ := startEmulator(tb)
	if _, err := e.AddDevices(n, emulator.DeviceSeed{Hostname: "node-%04d", Metro: "da"}); err != nil {
		tb.Fatal(err)
	}
	return emulatorGet(tb, e, "/projects/"+emulator.DefaultProjectID+"/devices?include=ip_addresses.parent_block&per_page=10000")
}

func emulatorGet(tb testing.TB, e *emulator.Emulator, path string) []byte {
	req, _ := http.NewRequest("GET", e.URL()+path, nil)
	req.Header.Set("X-Auth-Token", fakeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		tb.Fatalf("GET %s from the emulator: %d %v", path, resp.StatusCode, err)
	}
	return body
}

// What callers read of a reservation is the same with and without the
// trim, on the emulator's rendering of it.
func TestDropEmptyMapsKeepsWhatIsThere(t *testing.T) {
	extra := map[string]any{"x": 1}
	r := metalv1.IPReservation{
		Customdata: map[string]any{},
		Metro:      &metalv1.IPReservationMetro{AdditionalProperties: map[string]any{}},
		Facility:   &metalv1.IPReservationFacility{AdditionalProperties: extra},
		Assignments: []metalv1.IPAssignment{{
			AdditionalProperties: map[string]any{},
			AssignedTo:           &metalv1.Href{Href: "/devices/d", AdditionalProperties: map[string]any{}},
			Metro:                &metalv1.IPAssignmentMetro{AdditionalProperties: extra},
		}},
	}
	dropEmptyMaps(&r)
	a := r.Assignments[0]
	for name, m := range map[string]map[string]any{
		"customdata": r.Customdata, "metro": r.Metro.AdditionalProperties,
		"assignment": a.AdditionalProperties, "assigned_to": a.AssignedTo.AdditionalProperties,
	} {
		if m != nil {
			t.Errorf("%s: an empty map was kept", name)
		}
	}
	if !reflect.DeepEqual(r.Facility.AdditionalProperties, extra) || !reflect.DeepEqual(a.Metro.AdditionalProperties, extra) {
		t.Errorf("a map with members lost them: %v, %v", r.Facility.AdditionalProperties, a.Metro.AdditionalProperties)
	}
	if a.AssignedTo.Href != "/devices/d" {
		t.Errorf("assigned_to is %q", a.AssignedTo.Href)
	}
}

func TestReservationListingTrimKeepsWhatIsRead(t *testing.T) {
	body := emulatorReservations(t, 3)
	// read reads what the CCM reads; compacted, as the cache keeps it.
	read := func(body []byte, compact bool) []string {
		var list metalv1.IPReservationList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range list.IpAddresses {
			r := it.IPReservation
			if r == nil {
				t.Fatalf("an item did not decode as a reservation")
			}
			if compact {
				dropEmptyMaps(r)
			}
			metro, facility := r.GetMetro(), r.GetFacility()
			s := fmt.Sprint(r.GetId(), r.GetHref(), r.GetType(), r.GetState(), r.Tags, r.GetDetails(), r.GetCreatedAt(),
				r.GetAddress(), r.GetAddressFamily(), r.GetCidr(), r.GetNetwork(), r.GetPublic(), r.GetManagement(),
				metro.GetCode(), facility.GetCode())
			for _, a := range r.Assignments {
				metro := a.GetMetro()
				s += fmt.Sprint(" |", a.GetId(), a.GetHref(), a.GetState(), a.GetAddress(), a.GetNetwork(), a.GetCidr(),
					a.GetAssignedTo().Href, metro.GetCode())
			}
			out = append(out, s)
		}
		return out
	}
	trimmed, err := trimReservationList(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(trimmed) >= len(body)*2/3 {
		t.Errorf("the trim kept %d of %d bytes", len(trimmed), len(body))
	}
	want, got := read(body, false), read(trimmed, true)
	if len(want) < 3 || !strings.Contains(want[0], "/devices/") {
		t.Fatalf("the emulator's listing is not what this test expects: %v", want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read after the trim:\n%v\nwant\n%v", got, want)
	}
}

// BenchmarkRefreshReservations1000 is one listing of 1,000 assigned
// reservations as the emulator renders them; B/op is the decoding's
// garbage, retained-B the cache it leaves.
func BenchmarkRefreshReservations1000(b *testing.B) {
	benchmarkRefresh(b, "/ips", emulatorReservations(b, 1000), (*Client).RefreshReservations, func(c *Client) int {
		rs, _ := c.Reservations(context.Background())
		return len(rs)
	})
}

// BenchmarkRefreshDevices1000 is one listing of 1,000 devices as the
// emulator renders them; retained-B is the cache it leaves.
func BenchmarkRefreshDevices1000(b *testing.B) {
	benchmarkRefresh(b, "/devices", emulatorDevices(b, 1000), (*Client).RefreshDevices, func(c *Client) int {
		return len(c.devices.idx.ListKeys())
	})
}

// benchmarkRefresh serves body for the project's path and runs refresh;
// cached must count the 1,000 objects in the cache afterwards.
func benchmarkRefresh(b *testing.B, path string, body []byte, refresh func(*Client, context.Context) error, cached func(*Client) int) {
	f := newFakeAPI(b)
	f.handle("GET /projects/"+projectID+path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	c := f.client(func(o *Options) { o.PageSize = 10000 })
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	for b.Loop() {
		if err := refresh(c, ctx); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "retained-B")
	if n := cached(c); n != 1000 {
		b.Fatalf("%d objects cached, want 1000", n)
	}
}
