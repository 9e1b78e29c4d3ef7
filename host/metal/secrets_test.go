package metal

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// captureLogs sends klog (at -v=10) and the standard logger to a buffer.
func captureLogs(t *testing.T) *syncBuffer {
	t.Helper()
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	for k, v := range map[string]string{"v": "10", "logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	buf := &syncBuffer{}
	klog.SetOutput(buf)
	log.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
		log.SetOutput(os.Stderr)
	})
	return buf
}

// The key reaches the API as X-Auth-Token, and no log line or error.
func TestAPIKeyNeverLeaks(t *testing.T) {
	logs := captureLogs(t)
	f := newFakeAPI(t)
	tags := []string{"usage=cloud-provider-equinix-metal-auto", "service=x"}
	dup1, dup2 := reservation("d1", "147.75.0.1", tags...), reservation("d2", "147.75.0.2", tags...)
	dup2["created_at"] = "2026-02-01T00:00:00Z"
	f.handle("GET /projects/"+projectID+"/ips", func(w http.ResponseWriter, r *http.Request) {
		paged(w, r, "ip_addresses", []map[string]any{dup1, dup2})
	})
	// Every other route fails in a way that echoes the key back.
	echo := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 401, map[string]any{"error": "bad token " + r.Header.Get("X-Auth-Token")})
	}
	for _, route := range []string{"GET /devices/d", "GET /projects/" + projectID + "/devices", "GET /projects/" + projectID + "/bgp-config",
		"POST /projects/" + projectID + "/bgp-configs", "POST /devices/d/bgp/sessions", "GET /devices/d/bgp/sessions",
		"GET /devices/d/bgp/neighbors", "GET /ips/r", "DELETE /ips/r", "POST /devices/d/ips"} {
		f.handle(route, echo)
	}
	// Every call reaches the fake API, 401 or not: this test is about what
	// each path does with an answer that echoes the key.
	defer func(d time.Duration) { keyProbeInterval = d }(keyProbeInterval)
	keyProbeInterval = 0
	c := f.client()
	ctx := context.Background()

	var errs []error
	collect := func(_ any, err error) { errs = append(errs, err) }
	collect(c.Device(ctx, "d"))
	collect(c.DeviceByHostname(ctx, "h"))
	collect(c.ProjectBGPConfig(ctx))
	collect(nil, c.EnableProjectBGP(ctx, 65000, "Passw0rdPassw0rd"))
	collect(nil, c.EnsureDeviceBGPSession(ctx, "d"))
	collect(c.DeviceBGPNeighbors(ctx, "d"))
	collect(c.Reservation(ctx, "r"))
	collect(nil, c.DeleteIP(ctx, "r"))
	collect(c.AssignIP(ctx, "d", "147.75.0.1"))
	// Logs a warning about the duplicates, and succeeds.
	if r, err := c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags}); err != nil || r.GetId() != "d1" {
		t.Errorf("RequestReservation = %v, %v; want the oldest duplicate d1", r, err)
	}
	// Run logs its failed device refresh.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "device cache not refreshed") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	klog.Flush()

	for _, err := range errs {
		if err == nil {
			t.Error("a failing call returned no error")
			continue
		}
		if strings.Contains(err.Error(), fakeKey) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), fakeKey) {
			t.Errorf("the key is in an error: %v", err)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "device cache not refreshed") || !strings.Contains(out, "Several Equinix Metal IP reservations") {
		t.Errorf("expected log lines are missing; captured:\n%s", out)
	}
	if strings.Contains(out, fakeKey) || strings.Contains(out, "Passw0rdPassw0rd") {
		t.Errorf("a secret is in the logs:\n%s", out)
	}
	if s := fmt.Sprintf("%v %+v %#v", c, c, c.opts); strings.Contains(s, fakeKey) {
		t.Error("printing the Client shows the key")
	}
	if f.badAuth != 0 {
		t.Errorf("%d requests without the right X-Auth-Token", f.badAuth)
	}
}
