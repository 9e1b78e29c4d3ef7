package metal

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestKeyRejectedAndRotated: after a 401 the client says so once and sends
// nothing more (no storm of 401s from many workers) until a probe is due or
// the key changes; a new key is used at once and, once accepted, clears the
// state.
func TestKeyRejectedAndRotated(t *testing.T) {
	logs := captureLogs(t)
	f := newFakeAPI(t)
	var good atomic.Value
	good.Store("")
	var calls atomic.Int32
	f.handle("GET /ips/r", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("X-Auth-Token") != good.Load().(string) {
			writeJSON(w, 401, map[string]any{"error": "Invalid authentication token"})
			return
		}
		writeJSON(w, 200, reservation("r", "147.75.0.9"))
	})
	c := f.client()
	ctx := context.Background()
	start := time.Now()
	c.auth.now = func() time.Time { return start }

	for range 20 {
		if _, err := c.Reservation(ctx, "r"); err == nil {
			t.Fatal("a rejected key gave no error")
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls reached the API after a 401, want 1", n)
	}
	_, err := c.Reservation(ctx, "r")
	if !errors.Is(err, errKeyRejected) || !strings.Contains(err.Error(), "rotate apiKey") {
		t.Errorf("held-back call: %v; want ErrKeyRejected saying what to do", err)
	}
	if ok, why := c.KeyAccepted(); ok || !strings.Contains(why, "401") {
		t.Errorf("KeyAccepted = %v, %q", ok, why)
	}
	// klog writes an error to each severity's output, here one buffer: count
	// distinct lines.
	seen := map[string]bool{}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "rejects the API key") {
			seen[l] = true
		}
	}
	if len(seen) != 1 {
		t.Errorf("the rejection was logged %d times, want once:\n%s", len(seen), logs.String())
	}

	// A probe after keyProbeInterval; still rejected.
	c.auth.now = func() time.Time { return start.Add(keyProbeInterval + time.Second) }
	_, _ = c.Reservation(ctx, "r")
	_, _ = c.Reservation(ctx, "r")
	if n := calls.Load(); n != 2 {
		t.Errorf("%d calls after one probe interval, want 2", n)
	}

	// Rotation: the new key is sent at once, and accepted.
	good.Store("the-new-key-0123456789")
	if !c.SetAPIKey("the-new-key-0123456789") {
		t.Fatal("SetAPIKey reported no change")
	}
	if _, err := c.Reservation(ctx, "r"); err != nil {
		t.Fatalf("with the new key: %v", err)
	}
	if ok, _ := c.KeyAccepted(); !ok {
		t.Error("the new key is not reported accepted")
	}
	if c.SetAPIKey("the-new-key-0123456789") {
		t.Error("setting the same key again reported a change")
	}
	if strings.Contains(logs.String(), "the-new-key-0123456789") || strings.Contains(logs.String(), fakeKey) {
		t.Errorf("a key is in the logs:\n%s", logs.String())
	}
}
