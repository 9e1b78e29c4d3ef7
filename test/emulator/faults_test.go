package emulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

func reserveReq(metro string) metalv1.RequestIPReservationRequest {
	in := metalv1.IPReservationRequestInput{Type: "public_ipv4", Quantity: 1, Metro: metalv1.PtrString(metro), FailOnApprovalRequired: metalv1.PtrBool(true)}
	return metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&in)
}

func TestFaults(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)

	t.Run("429 with Retry-After", func(t *testing.T) {
		e.SetFault(emulator.RouteGetDevice, emulator.Fault{RateLimitShare: 1, RetryAfter: emulator.Duration(1500 * time.Millisecond)})
		defer e.SetFault(emulator.RouteGetDevice, emulator.Fault{})
		_, resp, err := c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
		wantStatus(t, resp, err, 429, "Too Many Requests")
		if got := resp.Header.Get("Retry-After"); got != "2" {
			t.Errorf("Retry-After %q, want 2 (rounded up)", got)
		}
		// Other routes are untouched.
		_, resp, err = c.DevicesApi.FindIPAssignments(ctx, dev1).Execute()
		wantStatus(t, resp, err, 200, "")
	})

	t.Run("5xx", func(t *testing.T) {
		e.SetFault(emulator.RouteListIPReservations, emulator.Fault{ServerErrorShare: 1, ServerErrorStatus: 503})
		defer e.SetFault(emulator.RouteListIPReservations, emulator.Fault{})
		_, resp, err := c.IPAddressesApi.FindIPReservations(ctx, projA).Execute()
		wantStatus(t, resp, err, 503, "Service Unavailable")
	})

	t.Run("connection reset", func(t *testing.T) {
		e.SetFault(emulator.AllRoutes, emulator.Fault{ResetShare: 1})
		defer e.SetFault(emulator.AllRoutes, emulator.Fault{})
		_, resp, err := c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
		if err == nil || resp != nil {
			t.Fatalf("resp %v err %v, want a transport error", resp, err)
		}
		if !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "EOF") {
			t.Errorf("error %v, want a reset", err)
		}
	})

	t.Run("latency", func(t *testing.T) {
		e.SetFault(emulator.RouteGetBGPConfig, emulator.Fault{Latency: emulator.Duration(150 * time.Millisecond)})
		defer e.SetFault(emulator.RouteGetBGPConfig, emulator.Fault{})
		start := time.Now()
		_, resp, err := c.BGPApi.FindBgpConfigByProject(ctx, projA).Execute()
		wantStatus(t, resp, err, 200, "")
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("answered in %v despite 150ms of latency", d)
		}
	})

	t.Run("a share of requests", func(t *testing.T) {
		e.SetFault(emulator.RouteGetDevice, emulator.Fault{RateLimitShare: 0.25, ServerErrorShare: 0.25})
		defer e.SetFault(emulator.RouteGetDevice, emulator.Fault{})
		e.ResetCounts()
		for i := 0; i < 400; i++ {
			_, _, _ = c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
		}
		st := e.Stats()[emulator.RouteGetDevice]
		if st.Requests != 400 || st.Statuses[429] < 60 || st.Statuses[429] > 140 || st.Statuses[500] < 60 || st.Statuses[500] > 140 ||
			st.Statuses[200]+st.Statuses[429]+st.Statuses[500] != 400 {
			t.Errorf("stats %+v, want about 100 each of 429 and 500", st)
		}
	})

	t.Run("a lost answer: served, then the connection reset", func(t *testing.T) {
		e.SetFault(emulator.RouteRequestIPReservation, emulator.Fault{LostShare: 1, LostFor: emulator.Duration(200 * time.Millisecond)})
		defer e.SetFault(emulator.RouteRequestIPReservation, emulator.Fault{})
		before := len(e.Reservations(projA))
		lost := e.InjectedFaults()[emulator.FaultLost]
		start := time.Now()
		_, resp, err := c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(reserveReq("da")).Execute()
		if err == nil || resp != nil {
			t.Fatalf("resp %v err %v, want a transport error", resp, err)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("the answer was lost after %v, want at least 200ms", d)
		}
		if got := len(e.Reservations(projA)); got != before+1 {
			t.Errorf("%d reservations, want %d: a lost answer's request is still served", got, before+1)
		}
		if got := e.InjectedFaults()[emulator.FaultLost]; got != lost+1 {
			t.Errorf("lost answers counted %d, want %d", got, lost+1)
		}
		e.SetFault(emulator.RouteRequestIPReservation, emulator.Fault{})
		// The same, scripted for the next call.
		e.FailNext(emulator.RouteRequestIPReservation, 1, emulator.Failure{Lost: true, LostFor: emulator.Duration(time.Millisecond)})
		if _, resp, err := c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(reserveReq("da")).Execute(); err == nil || resp != nil {
			t.Fatalf("scripted: resp %v err %v, want a transport error", resp, err)
		}
		if got := len(e.Reservations(projA)); got != before+2 {
			t.Errorf("%d reservations, want %d", got, before+2)
		}
		if got := e.InjectedFaults()[emulator.FaultLost]; got != lost+2 {
			t.Errorf("lost answers counted %d, want %d", got, lost+2)
		}
	})

	t.Run("500s and 503s mixed, counted by kind", func(t *testing.T) {
		e.SetFault(emulator.RouteGetDevice, emulator.Fault{ServerErrorShare: 0.5, UnavailableShare: 0.5})
		defer e.SetFault(emulator.RouteGetDevice, emulator.Fault{})
		e.ResetCounts()
		before := e.InjectedFaults()
		for i := 0; i < 100; i++ {
			_, _, _ = c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
		}
		st := e.Stats()[emulator.RouteGetDevice]
		got := e.InjectedFaults()
		if st.Statuses[500] < 25 || st.Statuses[503] < 25 || st.Statuses[500]+st.Statuses[503] != 100 {
			t.Errorf("stats %+v, want about 50 each of 500 and 503", st)
		}
		if got[emulator.FaultServerError]-before[emulator.FaultServerError] != st.Statuses[500] ||
			got[emulator.FaultUnavailable]-before[emulator.FaultUnavailable] != st.Statuses[503] {
			t.Errorf("injected %v (before %v), want the statuses %v", got, before, st.Statuses)
		}
	})

	t.Run("fail the next N calls", func(t *testing.T) {
		e.FailNext(emulator.RouteRequestIPReservation, 2, emulator.Failure{Status: 503})
		e.FailNext(emulator.RouteRequestIPReservation, 1, emulator.Failure{Status: 422, Message: "scripted"})
		for i, want := range []int{503, 503, 422, 201} {
			_, resp, err := c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(reserveReq("da")).Execute()
			if resp == nil || resp.StatusCode != want {
				t.Fatalf("call %d: %v %v, want %d", i, resp, err, want)
			}
		}
		if _, scripted := e.Faults(); len(scripted) != 0 {
			t.Errorf("scripts left: %v", scripted)
		}
		// Scripted failures come before authentication, like network faults.
		// (A POST: Go's transport retries a GET whose reused connection is
		// reset before any answer, as it would against the real API.)
		e.FailNext(emulator.AllRoutes, 1, emulator.Failure{Reset: true})
		// Judged by the response, not the error text: the emulator's random
		// port can contain "401" (CI once drew 40105).
		_, resetResp, err := client("bad token").IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(reserveReq("da")).Execute()
		if err == nil || resetResp != nil {
			t.Errorf("got %v (response %v), want a reset before the 401", err, resetResp)
		}
		// A GET reset on a reused connection is retried once by the
		// transport: two requests arrive.
		_, resp, err := c.DevicesApi.FindDeviceById(ctx, dev1).Execute() // leaves an idle connection
		wantStatus(t, resp, err, 200, "")
		e.ResetCounts()
		e.FailNext(emulator.RouteGetDevice, 1, emulator.Failure{Reset: true})
		_, resp, err = c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
		wantStatus(t, resp, err, 200, "")
		// (The reset request's handler may finish after the retry's.)
		deadline := time.Now().Add(2 * time.Second)
		st := e.Stats()[emulator.RouteGetDevice]
		for st.Statuses[0] != 1 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			st = e.Stats()[emulator.RouteGetDevice]
		}
		if st.Requests != 2 || st.Statuses[0] != 1 || st.Statuses[200] != 1 {
			t.Errorf("stats %+v, want a reset (status 0) and a retry", st)
		}
	})

	t.Run("unknown routes panic", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("no panic for a misspelt route")
			}
		}()
		e.SetFault("GET /device/{id}", emulator.Fault{Latency: 1})
	})
}

func TestCounters(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)
	e.ResetCounts()
	for i := 0; i < 3; i++ {
		_, _, _ = c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
	}
	_, _, _ = c.DevicesApi.FindDeviceById(ctx, "d0000000-0000-4000-8000-00000000ffff").Execute()
	_, _, _ = c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(reserveReq("da")).Execute()
	_, _, _ = client("bad").IPAddressesApi.FindIPReservations(ctx, projA).Execute()

	want := map[emulator.Route]int64{emulator.RouteGetDevice: 4, emulator.RouteRequestIPReservation: 1, emulator.RouteListIPReservations: 1}
	got := e.Counts()
	for r, n := range want {
		if got[r] != n {
			t.Errorf("%s: %d requests, want %d", r, got[r], n)
		}
	}
	if len(got) != len(want) || e.TotalRequests() != 6 {
		t.Errorf("counts %v, total %d", got, e.TotalRequests())
	}
	st := e.Stats()
	if s := st[emulator.RouteGetDevice].Statuses; s[200] != 3 || s[404] != 1 {
		t.Errorf("GET /devices/{id} statuses %v", s)
	}
	if s := st[emulator.RouteListIPReservations].Statuses; s[401] != 1 {
		t.Errorf("401 not counted: %v", s)
	}
	e.ResetCounts()
	if e.TotalRequests() != 0 || len(e.Counts()) != 0 {
		t.Errorf("after reset: %v", e.Counts())
	}
}

// admin calls an admin endpoint and decodes its JSON answer into out.
func admin(t *testing.T, e *emulator.Emulator, method, path, body string, want int, out any) {
	t.Helper()
	base := strings.TrimSuffix(e.URL(), emulator.BasePath)
	req, err := http.NewRequest(method, base+emulator.AdminPath+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

func TestAdminEndpoints(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	c := client(tokAll)

	admin(t, e, "GET", "/healthz", "", 200, nil)
	var routes []string
	admin(t, e, "GET", "/routes", "", 200, &routes)
	if len(routes) != len(emulator.Routes()) || routes[0] != "GET /devices/{id}" {
		t.Errorf("routes %v", routes)
	}

	_, _, _ = c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
	var cv emulator.CountersView
	admin(t, e, "GET", "/counters", "", 200, &cv)
	if cv.Total != 1 || cv.Routes[emulator.RouteGetDevice].Requests != 1 || cv.Routes[emulator.RouteGetDevice].Statuses[200] != 1 {
		t.Errorf("counters %+v", cv)
	}
	admin(t, e, "DELETE", "/counters", "", 204, nil)
	if e.TotalRequests() != 0 {
		t.Error("DELETE /counters did not reset")
	}

	admin(t, e, "POST", "/faults", `{"route":"GET /devices/{id}","rate_limit_share":1,"retry_after":"3s"}`, 204, nil)
	_, resp, err := c.DevicesApi.FindDeviceById(ctx, dev1).Execute()
	wantStatus(t, resp, err, 429, "")
	if resp.Header.Get("Retry-After") != "3" {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	var fv struct {
		Standing map[string]emulator.Fault `json:"standing"`
	}
	admin(t, e, "GET", "/faults", "", 200, &fv)
	if fv.Standing["GET /devices/{id}"].RateLimitShare != 1 {
		t.Errorf("faults %+v", fv)
	}
	admin(t, e, "DELETE", "/faults", "", 204, nil)
	admin(t, e, "POST", "/fail-next", `{"route":"POST /projects/{id}/ips","count":1,"status":500}`, 204, nil)
	_, resp, err = c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(reserveReq("da")).Execute()
	wantStatus(t, resp, err, 500, "")
	admin(t, e, "POST", "/faults", `{"route":"GET /nope","latency":"1s"}`, 422, nil)
	admin(t, e, "POST", "/faults", `{"route":"*","latncy":"1s"}`, 422, nil)

	// Seed more, change devices, read the state back.
	admin(t, e, "POST", "/seed", `{"devices":[{"hostname":"late","project":"`+projA+`","metro":"ny"}]}`, 204, nil)
	admin(t, e, "POST", "/devices/"+dev2+"/state", `{"state":"inactive"}`, 204, nil)
	admin(t, e, "DELETE", "/devices/"+dev3, "", 204, nil)
	var sv emulator.StateView
	admin(t, e, "GET", "/state", "", 200, &sv)
	var pa *emulator.ProjectView
	for i := range sv.Projects {
		if sv.Projects[i].ID == projA {
			pa = &sv.Projects[i]
		}
	}
	if pa == nil {
		t.Fatalf("state %+v", sv)
	}
	hosts := map[string]string{}
	for _, d := range pa.Devices {
		hosts[d.Hostname] = d.State
	}
	if len(hosts) != 3 || hosts["late"] != "active" || hosts["worker-0"] != "inactive" {
		t.Errorf("devices %v", hosts)
	}
	found := false
	for _, r := range pa.Reservations {
		found = found || r.HasTags(cpTag)
	}
	if !found {
		t.Error("the tagged control-plane reservation is not in the state")
	}
	admin(t, e, "POST", "/seed", `{"devices":[{"hostname":"x","metro":"zz","project":"`+projA+`"}]}`, 422, nil)
}

func TestSeedFiles(t *testing.T) {
	yml := `
tokens:
  - token: t1
    projects: [6a0e1a38-4c5d-4b1f-8f7e-2f3a4b5c6d01]
metros:
  - code: da
    public_ipv4: 203.0.113.0/24
facilities:
  - code: da11
    metro: da
projects:
  - id: 6a0e1a38-4c5d-4b1f-8f7e-2f3a4b5c6d01
    bgp: {asn: 65001, md5: Secret12345}
devices:
  - hostname: n0
    bgp_sessions: [ipv4]
reservations:
  - tags: [cp]
    assigned_to: []
`
	s, err := emulator.ParseSeed([]byte(yml), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, err := emulator.New(s, emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds := e.Devices(projA)
	if len(ds) != 1 || ds[0].Facility != "da11" || len(ds[0].BGPSessions) != 1 {
		t.Fatalf("devices %+v", ds)
	}
	if a, _ := ds[0].Address(emulator.TypePublicIPv4); !strings.HasPrefix(a.String(), "203.0.113.") {
		t.Errorf("public address %s is not from the seeded block", a)
	}
	if b, ok := e.BGPConfig(projA); !ok || b.ASN != 65001 || b.Status != "enabled" {
		t.Errorf("bgp %+v", b)
	}
	if _, err := emulator.ParseSeed([]byte(`{"devices":[{"hostnme":"typo"}]}`), ".json"); err == nil || !strings.Contains(err.Error(), "hostnme") {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := emulator.ParseSeed([]byte("devices:\n  - hostnme: typo\n"), ".yml"); err == nil {
		t.Error("unknown YAML key accepted")
	}
}
