package metal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

func TestNewRejectsBadOptions(t *testing.T) {
	good := Options{APIKey: config.Secret(fakeKey), ProjectID: projectID}
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no key", func(o *Options) { o.APIKey = "" }, "no API key; set apiKey in the cloud-config or METAL_API_KEY"},
		{"no project", func(o *Options) { o.ProjectID = "" }, "no project ID"},
		{"bad URL", func(o *Options) { o.BaseURL = "api.equinix.com" }, `base URL "api.equinix.com" is not an http(s) URL`},
		{"negative retries", func(o *Options) { o.Retries = -1 }, "retries is -1"},
		{"negative QPS", func(o *Options) { o.QPS = -1 }, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.mod(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), fakeKey) {
				t.Error("the key is in the error")
			}
		})
	}
	if _, err := New(good); err != nil {
		t.Errorf("New with good options: %v", err)
	}
}

func TestDeviceCache(t *testing.T) {
	f := newFakeAPI(t)
	var devices []map[string]any
	for i := range 25 {
		devices = append(devices, device(fmt.Sprintf("dev-%02d", i), fmt.Sprintf("node-%02d", i)))
	}
	var includes []string
	var mu sync.Mutex
	f.handle("GET /projects/"+projectID+"/devices", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		includes = append(includes, r.URL.Query().Get("include"))
		mu.Unlock()
		if h := r.URL.Query().Get("hostname"); h != "" {
			var match []map[string]any
			if h == "late-node" {
				// The API's filter may match more than the exact name.
				match = append(match, device("dev-late", "late-node"), device("dev-later", "late-node-2"))
			}
			paged(w, r, "devices", match)
			return
		}
		paged(w, r, "devices", devices)
	})
	f.handle("GET /devices/dev-new", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, device("dev-new", "node-new"))
	})
	c := f.client(func(o *Options) { o.PageSize = 10 })
	ctx := context.Background()

	// First use: one full listing (3 pages of 10).
	d, err := c.Device(ctx, "dev-24")
	if err != nil || d.GetHostname() != "node-24" {
		t.Fatalf("Device(dev-24) = %v, %v", d, err)
	}
	if n := f.count("GET /projects/" + projectID + "/devices"); n != 3 {
		t.Errorf("first lookup made %d listing calls, want 3 pages", n)
	}
	for _, inc := range includes {
		if inc != "ip_addresses.parent_block" {
			t.Errorf("listing include = %q, want ip_addresses.parent_block", inc)
		}
	}
	f.resetCounts()

	// Cached: by ID and by hostname, no call at all.
	for i := range 25 {
		if _, err := c.Device(ctx, fmt.Sprintf("dev-%02d", i)); err != nil {
			t.Fatal(err)
		}
		if d, err := c.DeviceByHostname(ctx, fmt.Sprintf("node-%02d", i)); err != nil || d.GetId() != fmt.Sprintf("dev-%02d", i) {
			t.Fatalf("DeviceByHostname = %v, %v", d, err)
		}
	}
	if n := f.total(); n != 0 {
		t.Errorf("cached lookups made %d calls, want 0", n)
	}

	// A device created after the listing: one GET, then cached.
	for range 3 {
		if d, err := c.Device(ctx, "dev-new"); err != nil || d.GetHostname() != "node-new" {
			t.Fatalf("Device(dev-new) = %v, %v", d, err)
		}
	}
	if n := f.count("GET /devices/dev-new"); n != 1 {
		t.Errorf("new device fetched %d times, want 1", n)
	}

	// A hostname not in the cache: one filtered listing, exact match only.
	d, err = c.DeviceByHostname(ctx, "late-node")
	if err != nil || d.GetId() != "dev-late" {
		t.Fatalf("DeviceByHostname(late-node) = %v, %v", d, err)
	}
	f.resetCounts()
	if _, err := c.DeviceByHostname(ctx, "late-node"); err != nil {
		t.Fatal(err)
	}
	if n := f.total(); n != 0 {
		t.Errorf("second lookup of late-node made %d calls", n)
	}

	// Unknown ID: a real 404 is IsNotFound.
	_, err = c.Device(ctx, "gone")
	if !IsNotFound(err) {
		t.Errorf("Device(gone) error = %v, want IsNotFound", err)
	}
	// Unknown hostname: authoritative empty listing is IsNotFound too.
	_, err = c.DeviceByHostname(ctx, "nobody")
	if !IsNotFound(err) {
		t.Errorf("DeviceByHostname(nobody) error = %v, want IsNotFound", err)
	}

	// ForgetDevice makes the next lookup ask again.
	c.ForgetDevice("dev-new")
	f.resetCounts()
	if _, err := c.Device(ctx, "dev-new"); err != nil {
		t.Fatal(err)
	}
	if n := f.count("GET /devices/dev-new"); n != 1 {
		t.Errorf("after ForgetDevice: %d GETs, want 1", n)
	}
}

func TestDeviceByHostnameAmbiguous(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /projects/"+projectID+"/devices", func(w http.ResponseWriter, r *http.Request) {
		paged(w, r, "devices", []map[string]any{device("a", "twin"), device("b", "twin")})
	})
	c := f.client()
	_, err := c.DeviceByHostname(context.Background(), "twin")
	want := `find device by hostname: 2 devices are named "twin" ([a b]); set the node's spec.providerID to equinixmetal://<device-id> to pick one`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

// DeviceFresh reads through the cache; a 404 removes the cached device.
func TestDeviceFreshRemovesDeletedDevice(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /projects/"+projectID+"/devices", func(w http.ResponseWriter, r *http.Request) {
		paged(w, r, "devices", []map[string]any{device("d1", "n1")})
	})
	c := f.client()
	ctx := context.Background()
	if _, err := c.Device(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	// d1 is deleted in the API (no handler for GET /devices/d1 → 404).
	if _, err := c.DeviceFresh(ctx, "d1"); !IsNotFound(err) {
		t.Fatalf("DeviceFresh error = %v, want IsNotFound", err)
	}
	if _, err := c.Device(ctx, "d1"); !IsNotFound(err) {
		t.Errorf("cached lookup after the 404 = %v, want IsNotFound", err)
	}
}

// reservationAPI serves GET/POST /projects/{id}/ips and GET/DELETE /ips/{id}
// from an in-memory list.
type reservationAPI struct {
	mu    sync.Mutex
	items []map[string]any
	seq   int
	// postStatus, when set, is answered to POST after (maybe) creating.
	postStatus  int
	createOnErr bool
	vrf         bool
}

func (ra *reservationAPI) install(f *fakeAPI) {
	f.handle("GET /projects/"+projectID+"/ips", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("types") != "public_ipv4" || r.URL.Query().Get("include") != "assignments" {
			writeJSON(w, 400, map[string]any{"error": "test expects types=public_ipv4&include=assignments, got " + r.URL.RawQuery})
			return
		}
		ra.mu.Lock()
		items := append([]map[string]any(nil), ra.items...)
		ra.mu.Unlock()
		if ra.vrf {
			// A VRF reservation decodes as VrfIpReservation, not IPReservation.
			items = append(items, map[string]any{"id": "vrf-1", "type": "vrf", "vrf": map[string]any{"id": "v"}, "unknown_field": 1})
		}
		paged(w, r, "ip_addresses", items)
	})
	f.handle("POST /projects/"+projectID+"/ips", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Type, Metro, Details string
			Tags                 []string
			Quantity             int
			FailOnApproval       bool `json:"fail_on_approval_required"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		ra.mu.Lock()
		defer ra.mu.Unlock()
		if in.Type != "public_ipv4" || in.Quantity != 1 || !in.FailOnApproval {
			writeJSON(w, 422, map[string]any{"errors": []string{fmt.Sprintf("bad request %+v", in)}})
			return
		}
		ra.seq++
		item := reservation(fmt.Sprintf("new-%d", ra.seq), fmt.Sprintf("147.75.0.%d", ra.seq), in.Tags...)
		if ra.postStatus != 0 {
			if ra.createOnErr {
				ra.items = append(ra.items, item)
			}
			writeJSON(w, ra.postStatus, map[string]any{"error": "the API is having a bad day"})
			return
		}
		ra.items = append(ra.items, item)
		writeJSON(w, 201, item)
	})
}

func TestReservationsWithTagsIsCached(t *testing.T) {
	f := newFakeAPI(t)
	ra := &reservationAPI{vrf: true}
	for i := range 35 {
		ra.items = append(ra.items, reservation(fmt.Sprintf("r%02d", i), fmt.Sprintf("147.75.1.%d", i),
			"usage=cloud-provider-equinix-metal-auto", fmt.Sprintf("service=s%02d", i), "cluster=c1"))
	}
	ra.items = append(ra.items, reservation("other-cluster", "147.75.2.1", "usage=cloud-provider-equinix-metal-auto", "service=s07", "cluster=c2"))
	ra.install(f)
	c := f.client(func(o *Options) { o.PageSize = 10 })
	ctx := context.Background()

	tests := []struct {
		tags []string
		want []string
	}{
		{[]string{"usage=cloud-provider-equinix-metal-auto", "service=s07", "cluster=c1"}, []string{"r07"}},
		{[]string{"service=s07"}, []string{"other-cluster", "r07"}},
		{[]string{"cluster=c2"}, []string{"other-cluster"}},
		{[]string{"service=s34", "cluster=c1"}, []string{"r34"}},
		{[]string{"service=nope"}, nil},
		{[]string{"service=s01", "cluster=c2"}, nil},
	}
	for _, tt := range tests {
		got, err := c.ReservationsWithTags(ctx, tt.tags...)
		if err != nil {
			t.Fatalf("ReservationsWithTags(%v): %v", tt.tags, err)
		}
		var gotIDs []string
		for _, r := range got {
			gotIDs = append(gotIDs, r.GetId())
		}
		if fmt.Sprint(gotIDs) != fmt.Sprint(tt.want) {
			t.Errorf("ReservationsWithTags(%v) = %v, want %v", tt.tags, gotIDs, tt.want)
		}
	}
	// 36 public + 1 VRF item = 37 → 4 pages of 10, read once for all lookups.
	if n := f.count("GET /projects/" + projectID + "/ips"); n != 4 {
		t.Errorf("%d listing calls, want 4 (one full paginated read)", n)
	}
	if _, err := c.ReservationsWithTags(ctx); err == nil {
		t.Error("no tags accepted")
	}
}

func TestRetries(t *testing.T) {
	t.Run("GET retried on 5xx until it works", func(t *testing.T) {
		f := newFakeAPI(t)
		var n atomic.Int32
		f.handle("GET /devices/d1", func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) <= 2 {
				writeJSON(w, 502, map[string]any{"error": "bad gateway"})
				return
			}
			writeJSON(w, 200, device("d1", "n1"))
		})
		c := f.client()
		if _, err := c.DeviceFresh(context.Background(), "d1"); err != nil {
			t.Fatal(err)
		}
		if got := f.count("GET /devices/d1"); got != 3 {
			t.Errorf("%d requests, want 3", got)
		}
	})
	t.Run("429 with Retry-After is waited for and retried", func(t *testing.T) {
		f := newFakeAPI(t)
		var n atomic.Int32
		var first time.Time
		var waited time.Duration
		f.handle("GET /devices/d1", func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				first = time.Now()
				w.Header().Set("Retry-After", "1")
				writeJSON(w, 429, map[string]any{"error": "slow down"})
				return
			}
			waited = time.Since(first)
			writeJSON(w, 200, device("d1", "n1"))
		})
		c := f.client(func(o *Options) { o.RetryWaitMax = 5 * time.Second })
		if _, err := c.DeviceFresh(context.Background(), "d1"); err != nil {
			t.Fatal(err)
		}
		if got := f.count("GET /devices/d1"); got != 2 {
			t.Errorf("%d requests, want 2", got)
		}
		// Not a timing assertion on performance: Retry-After: 1 means "not
		// before one second", and sending earlier would break the contract.
		if waited < 900*time.Millisecond {
			t.Errorf("retried after %v, before the 1s Retry-After", waited)
		}
	})
	t.Run("429 asking for too long is returned at once with RetryAfter", func(t *testing.T) {
		f := newFakeAPI(t)
		f.handle("GET /devices/d1", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3600")
			writeJSON(w, 429, map[string]any{"error": "quota exhausted"})
		})
		c := f.client()
		_, err := c.DeviceFresh(context.Background(), "d1")
		var e *callError
		if !errors.As(err, &e) || e.StatusCode != 429 || e.RetryAfter != time.Hour {
			t.Fatalf("error = %#v, want a 429 with RetryAfter 1h", err)
		}
		if got := f.count("GET /devices/d1"); got != 1 {
			t.Errorf("%d requests, want 1", got)
		}
	})
	t.Run("GET gives up after Retries with the API's last message", func(t *testing.T) {
		f := newFakeAPI(t)
		f.handle("GET /devices/d1", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 500, map[string]any{"error": "internal error"})
		})
		c := f.client(func(o *Options) { o.Retries = 2 })
		_, err := c.DeviceFresh(context.Background(), "d1")
		if want := `get device: 500 Internal Server Error: "internal error"`; err == nil || err.Error() != want {
			t.Errorf("error = %v, want %s", err, want)
		}
		if got := f.count("GET /devices/d1"); got != 3 {
			t.Errorf("%d requests, want 3 (1 + 2 retries)", got)
		}
	})
	t.Run("POST is never retried", func(t *testing.T) {
		for _, fault := range []string{"503", "429", "reset"} {
			f := newFakeAPI(t)
			f.handle("POST /devices/d1/ips", func(w http.ResponseWriter, r *http.Request) {
				switch fault {
				case "503":
					writeJSON(w, 503, map[string]any{"error": "unavailable"})
				case "429":
					w.Header().Set("Retry-After", "0")
					writeJSON(w, 429, map[string]any{"error": "slow down"})
				default:
					hijackClose(w, r)
				}
			})
			c := f.client()
			if _, err := c.AssignIP(context.Background(), "d1", "147.75.0.1"); err == nil {
				t.Errorf("%s: no error", fault)
			}
			if got := f.count("POST /devices/d1/ips"); got != 1 {
				t.Errorf("%s: POST sent %d times, want 1", fault, got)
			}
		}
	})
	t.Run("DELETE retried on a transport error; 404 is success", func(t *testing.T) {
		f := newFakeAPI(t)
		var n atomic.Int32
		f.handle("DELETE /ips/r1", func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				hijackClose(w, r)
				return
			}
			writeJSON(w, 404, map[string]any{"errors": []string{"Not found"}})
		})
		c := f.client()
		if err := c.DeleteIP(context.Background(), "r1"); err != nil {
			t.Fatalf("DeleteIP = %v", err)
		}
		if got := f.count("DELETE /ips/r1"); got != 2 {
			t.Errorf("%d requests, want 2", got)
		}
	})
}

// A transport error on every SDK call gives an error, not a panic (upstream
// dereferenced the nil *http.Response).
func TestTransportErrorsDoNotPanic(t *testing.T) {
	f := newFakeAPI(t)
	f.srv.Config.Handler = http.HandlerFunc(hijackClose)
	c := f.client(func(o *Options) { o.Retries = 1 })
	ctx := context.Background()
	calls := map[string]func() error{
		"Device":                 func() error { _, err := c.Device(ctx, "d"); return err },
		"DeviceFresh":            func() error { _, err := c.DeviceFresh(ctx, "d"); return err },
		"DeviceByHostname":       func() error { _, err := c.DeviceByHostname(ctx, "h"); return err },
		"ProjectBGPConfig":       func() error { _, err := c.ProjectBGPConfig(ctx); return err },
		"EnableProjectBGP":       func() error { return c.EnableProjectBGP(ctx, 65000, "Secret12345") },
		"EnsureDeviceBGPSession": func() error { return c.EnsureDeviceBGPSession(ctx, "d") },
		"DeviceBGPSessions":      func() error { _, err := c.DeviceBGPSessions(ctx, "d"); return err },
		"DeviceBGPNeighbors":     func() error { _, err := c.DeviceBGPNeighbors(ctx, "d"); return err },
		"ReservationsWithTags":   func() error { _, err := c.ReservationsWithTags(ctx, "t"); return err },
		"ReservationsWithTagsFresh": func() error {
			_, err := c.ReservationsWithTagsFresh(ctx, "t")
			return err
		},
		"RequestReservation": func() error {
			_, err := c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: []string{"t"}})
			return err
		},
		"Reservation":         func() error { _, err := c.Reservation(ctx, "r"); return err },
		"DeleteIP":            func() error { return c.DeleteIP(ctx, "r") },
		"AssignIP":            func() error { _, err := c.AssignIP(ctx, "d", "1.2.3.4"); return err },
		"RefreshDevices":      func() error { return c.RefreshDevices(ctx) },
		"RefreshReservations": func() error { return c.RefreshReservations(ctx) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if err == nil {
				t.Fatal("no error")
			}
			if IsNotFound(err) {
				t.Errorf("a transport error counts as not found: %v", err)
			}
			var e *callError
			if !errors.As(err, &e) || e.StatusCode != 0 {
				t.Errorf("error %v is not an *callError without status", err)
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), fakeKey) {
				t.Errorf("bad error text: %q", err)
			}
		})
	}
}

func TestCallerContextIsHonoured(t *testing.T) {
	f := newFakeAPI(t)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	f.handle("GET /devices/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	c := f.client()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { _, err := c.DeviceFresh(ctx, "slow"); errc <- err }()
	for f.count("GET /devices/slow") == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestPerAttemptTimeout(t *testing.T) {
	f := newFakeAPI(t)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	f.handle("GET /devices/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	c := f.client(func(o *Options) { o.Timeout = 50 * time.Millisecond; o.Retries = 1 })
	_, err := c.DeviceFresh(context.Background(), "slow")
	if err == nil || !strings.Contains(err.Error(), "get device:") {
		t.Fatalf("error = %v", err)
	}
	if n := f.count("GET /devices/slow"); n != 2 {
		t.Errorf("%d attempts, want 2 (timeout is per attempt, then one retry)", n)
	}
}

func TestBGP(t *testing.T) {
	t.Run("project config", func(t *testing.T) {
		tests := []struct {
			name    string
			code    int
			body    any
			wantErr error
		}{
			{"404 means not enabled", 404, map[string]any{"errors": []string{"Not found"}}, ErrBGPNotEnabled},
			{"empty object means not enabled", 200, map[string]any{}, ErrBGPNotEnabled},
			{"disabled", 200, map[string]any{"id": "b", "status": "disabled", "asn": 65000}, ErrBGPNotEnabled},
			{"enabled", 200, map[string]any{"id": "b", "status": "enabled", "asn": 65000, "md5": "Secret12345"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFakeAPI(t)
				f.handle("GET /projects/"+projectID+"/bgp-config", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, tt.code, tt.body) })
				cfg, err := f.client().ProjectBGPConfig(context.Background())
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && cfg.GetAsn() != 65000) {
					t.Errorf("ProjectBGPConfig = %v, %v; want error %v", cfg, err, tt.wantErr)
				}
			})
		}
	})
	t.Run("enable never shows the password", func(t *testing.T) {
		f := newFakeAPI(t)
		const md5 = "Md5Pass9999xyz"
		var body map[string]any
		f.handle("POST /projects/"+projectID+"/bgp-configs", func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewDecoder(r.Body).Decode(&body)
			writeJSON(w, 422, map[string]any{"errors": []string{"md5 " + md5 + " is not accepted"}})
		})
		err := f.client().EnableProjectBGP(context.Background(), 65000, config.Secret(md5))
		if err == nil || strings.Contains(err.Error(), md5) {
			t.Errorf("error = %v (must exist and not contain the password)", err)
		}
		if body["md5"] != md5 || body["asn"] != float64(65000) || body["deployment_type"] != "local" {
			t.Errorf("request body = %v", body)
		}
	})
	t.Run("session", func(t *testing.T) {
		tests := []struct {
			name      string
			post      func(w http.ResponseWriter)
			sessions  []map[string]any
			wantErr   bool
			wantCalls int
		}{
			{"created", func(w http.ResponseWriter) {
				writeJSON(w, 201, map[string]any{"id": "s", "address_family": "ipv4"})
			}, nil, false, 1},
			{"already has session", func(w http.ResponseWriter) {
				writeJSON(w, 422, map[string]any{"errors": []string{"device already has session"}})
			}, nil, false, 1},
			{"other 422 but the session exists", func(w http.ResponseWriter) {
				writeJSON(w, 422, map[string]any{"errors": []string{"a session for ipv4 exists"}})
			}, []map[string]any{{"id": "s", "address_family": "ipv4"}}, false, 2},
			{"other 422 and no session", func(w http.ResponseWriter) {
				writeJSON(w, 422, map[string]any{"errors": []string{"BGP is not enabled for this project"}})
			}, []map[string]any{{"id": "s6", "address_family": "ipv6"}}, true, 2},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFakeAPI(t)
				f.handle("POST /devices/d1/bgp/sessions", func(w http.ResponseWriter, r *http.Request) { tt.post(w) })
				f.handle("GET /devices/d1/bgp/sessions", func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, 200, map[string]any{"bgp_sessions": tt.sessions})
				})
				c := f.client()
				err := c.EnsureDeviceBGPSession(context.Background(), "d1")
				if (err != nil) != tt.wantErr {
					t.Fatalf("error = %v, want error %v", err, tt.wantErr)
				}
				if n := f.total(); n != tt.wantCalls {
					t.Errorf("%d calls, want %d", n, tt.wantCalls)
				}
				f.resetCounts()
				err2 := c.EnsureDeviceBGPSession(context.Background(), "d1")
				if !tt.wantErr && (err2 != nil || f.total() != 0) {
					t.Errorf("second ensure: %v, %d calls; want nil, 0", err2, f.total())
				}
			})
		}
	})
	t.Run("neighbors", func(t *testing.T) {
		f := newFakeAPI(t)
		f.handle("GET /devices/d1/bgp/neighbors", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]any{"bgp_neighbors": []map[string]any{{
				"address_family": 4, "customer_as": 65000, "customer_ip": "10.0.0.2",
				"peer_as": 65530, "peer_ips": []string{"169.254.255.1", "169.254.255.2"},
			}}})
		})
		n, err := f.client().DeviceBGPNeighbors(context.Background(), "d1")
		if err != nil || len(n) != 1 || n[0].GetPeerAs() != 65530 || len(n[0].PeerIps) != 2 {
			t.Errorf("DeviceBGPNeighbors = %+v, %v", n, err)
		}
	})
}

func TestWritesUpdateTheReservationCache(t *testing.T) {
	f := newFakeAPI(t)
	eip := reservation("eip", "147.75.9.9", "cp-tag")
	eip["assignments"] = []any{map[string]any{"id": "asg-1", "address": "147.75.9.9", "network": "147.75.9.9", "cidr": 32}}
	ra := &reservationAPI{items: []map[string]any{eip, reservation("svc", "147.75.9.10", "svc-tag")}}
	ra.install(f)
	f.handle("DELETE /ips/asg-1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	f.handle("DELETE /ips/svc", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	f.handle("POST /devices/d2/ips", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		_ = json.NewDecoder(r.Body).Decode(&in)
		writeJSON(w, 201, map[string]any{"id": "asg-2", "address": in["address"], "network": "147.75.9.9", "cidr": 32,
			"assigned_to": map[string]any{"href": "/metal/v1/devices/d2"}})
	})
	f.handle("GET /ips/eip", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, eip) })
	d1 := device("d1", "cp-1")
	d1["ip_addresses"] = []any{map[string]any{"id": "asg-1", "address": "147.75.9.9", "public": true, "address_family": 4}}
	f.handle("GET /projects/"+projectID+"/devices", func(w http.ResponseWriter, r *http.Request) {
		paged(w, r, "devices", []map[string]any{d1, device("d2", "cp-2")})
	})
	c := f.client()
	ctx := context.Background()
	if err := c.RefreshDevices(ctx); err != nil {
		t.Fatal(err)
	}

	assignments := func() []string {
		t.Helper()
		got, err := c.ReservationsWithTags(ctx, "cp-tag")
		if err != nil || len(got) != 1 {
			t.Fatalf("ReservationsWithTags(cp-tag) = %v, %v", got, err)
		}
		var ids []string
		for _, a := range got[0].Assignments {
			ids = append(ids, a.GetId())
		}
		return ids
	}
	if got := assignments(); fmt.Sprint(got) != "[asg-1]" {
		t.Fatalf("assignments = %v", got)
	}
	f.resetCounts()

	if err := c.DeleteIP(ctx, "asg-1"); err != nil { // unassign
		t.Fatal(err)
	}
	if got := assignments(); len(got) != 0 {
		t.Errorf("after unassign: %v", got)
	}
	if _, err := c.AssignIP(ctx, "d2", "147.75.9.9"); err != nil {
		t.Fatal(err)
	}
	if got := assignments(); fmt.Sprint(got) != "[asg-2]" {
		t.Errorf("after assign: %v", got)
	}
	deviceHas := func(id, asg string) bool {
		t.Helper()
		d, err := c.Device(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range d.IpAddresses {
			if a.GetId() == asg {
				return true
			}
		}
		return false
	}
	if !deviceHas("d2", "asg-2") {
		t.Error("the cached device d2 does not show its new assignment")
	}
	if deviceHas("d1", "asg-1") {
		t.Error("the cached device d1 still shows the assignment that was deleted")
	}
	if err := c.DeleteIP(ctx, "svc"); err != nil { // release a Service EIP
		t.Fatal(err)
	}
	if got, _ := c.ReservationsWithTags(ctx, "svc-tag"); len(got) != 0 {
		t.Errorf("deleted reservation still cached: %v", got)
	}
	if n := f.count("GET /projects/" + projectID + "/ips"); n != 0 {
		t.Errorf("writes caused %d re-listings; the cache should be updated in place", n)
	}
	// A fresh GET overwrites the cached copy (here: the API still says asg-1).
	if _, err := c.Reservation(ctx, "eip"); err != nil {
		t.Fatal(err)
	}
	if got := assignments(); fmt.Sprint(got) != "[asg-1]" {
		t.Errorf("after Reservation GET: %v", got)
	}
	// Fresh lookup bypasses the cache.
	f.resetCounts()
	if _, err := c.ReservationsWithTagsFresh(ctx, "cp-tag"); err != nil {
		t.Fatal(err)
	}
	if n := f.count("GET /projects/" + projectID + "/ips"); n != 1 {
		t.Errorf("fresh lookup made %d listings, want 1", n)
	}
}
