package metal

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func counter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	var v float64
	var err error
	switch name {
	case "requests":
		v, err = testutil.GetCounterMetricValue(apiRequests.WithLabelValues(labels...))
	case "retries":
		v, err = testutil.GetCounterMetricValue(apiRetries.WithLabelValues(labels...))
	case "cache":
		v, err = testutil.GetCounterMetricValue(cacheRequests.WithLabelValues(labels...))
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMetrics(t *testing.T) {
	f := newFakeAPI(t)
	var n atomic.Int32
	f.handle("GET /devices/m1", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			writeJSON(w, 503, map[string]any{"error": "busy"})
			return
		}
		writeJSON(w, 200, device("m1", "metrics-node"))
	})
	f.handle("GET /projects/"+projectID+"/devices", func(w http.ResponseWriter, r *http.Request) {
		paged(w, r, "devices", nil)
	})
	c := f.client()
	ctx := context.Background()

	ok0, busy0 := counter(t, "requests", "get_device", "200"), counter(t, "requests", "get_device", "503")
	retry0 := counter(t, "retries", "get_device")
	hit0, miss0 := counter(t, "cache", "devices", "hit"), counter(t, "cache", "devices", "miss")

	if _, err := c.Device(ctx, "m1"); err != nil { // miss: 503 then 200
		t.Fatal(err)
	}
	if _, err := c.Device(ctx, "m1"); err != nil { // hit
		t.Fatal(err)
	}
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"requests{get_device,200}", counter(t, "requests", "get_device", "200") - ok0, 1},
		{"requests{get_device,503}", counter(t, "requests", "get_device", "503") - busy0, 1},
		{"retries{get_device}", counter(t, "retries", "get_device") - retry0, 1},
		{"cache{devices,hit}", counter(t, "cache", "devices", "hit") - hit0, 1},
		{"cache{devices,miss}", counter(t, "cache", "devices", "miss") - miss0, 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s increased by %v, want %v", c.name, c.got, c.want)
		}
	}

	// They are in the registry the CCM's /metrics serves.
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), "equinix_metal_") {
			found[mf.GetName()] = true
		}
	}
	for _, name := range []string{"equinix_metal_api_requests_total", "equinix_metal_api_request_duration_seconds",
		"equinix_metal_api_retries_total", "equinix_metal_api_rate_limiter_wait_seconds",
		"equinix_metal_cache_requests_total", "equinix_metal_cache_refreshes_total", "equinix_metal_cache_objects"} {
		if !found[name] {
			t.Errorf("%s is not in legacyregistry", name)
		}
	}
}

// Every request, retries included, takes a token from the one bucket.
func TestRateLimiterCoversEveryAttempt(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /devices/busy", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 503, map[string]any{"error": "busy"})
	})
	f.handle("GET /devices/ok", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, device("ok", "n"))
	})
	// One token, then one per ~17 minutes: the second request cannot go.
	c := f.client(func(o *Options) { o.QPS = 0.001; o.Burst = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := c.DeviceFresh(ctx, "busy") // first attempt uses the token; the retry must wait
	if err == nil || !strings.Contains(err.Error(), "client-side rate limit") {
		t.Fatalf("error = %v, want the rate limit to stop the retry", err)
	}
	if n := f.count("GET /devices/busy"); n != 1 {
		t.Errorf("%d attempts reached the API, want 1", n)
	}
	// Another operation shares the same bucket.
	_, err = c.DeviceFresh(ctx, "ok")
	if err == nil || !strings.Contains(err.Error(), "client-side rate limit") {
		t.Fatalf("error = %v, want the shared rate limit", err)
	}
	if n := f.count("GET /devices/ok"); n != 0 {
		t.Errorf("%d requests went past the limiter", n)
	}
}
