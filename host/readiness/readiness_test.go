package readiness

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/server/healthz"
)

var (
	allOK = []Check{
		{"equinix-api", true, "the API answers and accepts the key"},
		{"module", true, "loaded"},
		{"caches", true, "informers synced"},
	}
	keyRejected = []Check{
		{"equinix-api", false, "the Equinix Metal API has rejected the API key (401) since 2026-11-24T10:00:00Z"},
		{"module", true, "loaded"},
		{"caches", true, "informers synced"},
	}
)

// TestHandler: the answers of /readyz and /livez, whole bodies, in
// Kubernetes' format.
func TestHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		checks []Check
		path   string
		code   int
		body   string
	}{
		{"all ok", allOK, "/readyz", 200, "ok"},
		{"all ok, verbose", allOK, "/readyz?verbose",
			200, "[+]equinix-api ok\n[+]module ok\n[+]caches ok\nreadyz check passed\n"},
		{"one failing: verbose anyway", keyRejected, "/readyz",
			503, "[-]equinix-api failed: reason withheld\n[+]module ok\n[+]caches ok\nreadyz check failed\n"},
		{"one failing, verbose", keyRejected, "/readyz?verbose",
			503, "[-]equinix-api failed: reason withheld\n[+]module ok\n[+]caches ok\nreadyz check failed\n"},
		{"failing check's own path gives the reason", keyRejected, "/readyz/equinix-api",
			503, "internal server error: the Equinix Metal API has rejected the API key (401) since 2026-11-24T10:00:00Z\n"},
		{"passing check's own path", keyRejected, "/readyz/caches", 200, "ok"},
		{"unknown check's path", allOK, "/readyz/etcd", 404, "404 page not found\n"},
		{"failing check excluded", keyRejected, "/readyz?exclude=equinix-api", 200, "ok"},
		{"failing check excluded, verbose", keyRejected, "/readyz?verbose&exclude=equinix-api",
			200, "[+]equinix-api excluded: ok\n[+]module ok\n[+]caches ok\nreadyz check passed\n"},
		{"exclude of an unknown check", allOK, "/readyz?verbose&exclude=etcd",
			200, "[+]equinix-api ok\n[+]module ok\n[+]caches ok\nwarn: some health checks cannot be excluded: no matches for \"etcd\"\nreadyz check passed\n"},
		{"livez", keyRejected, "/livez", 200, "ok"},
		{"livez, verbose, while not ready", keyRejected, "/livez?verbose", 200, "[+]ping ok\n[+]log ok\nlivez check passed\n"},
		{"livez ping", keyRejected, "/livez/ping", 200, "ok"},
		{"no checks", nil, "/readyz?verbose", 200, "[+]ping ok\nreadyz check passed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			newHandler(func() []Check { return tc.checks }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Errorf("GET %s: %d\n%s\nwant %d\n%s", tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// TestSameAsKubernetes: bodies and headers are what k8s.io/apiserver's
// healthz answers for the same checks, installed the way kube-apiserver
// does; only a failure's status differs (503 for healthz's 500).
func TestSameAsKubernetes(t *testing.T) {
	ref := http.NewServeMux()
	var hc []healthz.HealthChecker
	for _, c := range keyRejected {
		hc = append(hc, healthz.NamedCheck(c.Name, func(*http.Request) error {
			if c.OK {
				return nil
			}
			return errors.New(c.Reason)
		}))
	}
	healthz.InstallReadyzHandler(ref, hc...)
	ours := newHandler(func() []Check { return keyRejected })
	for _, path := range []string{"/readyz", "/readyz?verbose", "/readyz/equinix-api", "/readyz/module", "/readyz?exclude=equinix-api&verbose", "/readyz?exclude=x"} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		ref.ServeHTTP(want, httptest.NewRequest(http.MethodGet, path, nil))
		ours.ServeHTTP(got, httptest.NewRequest(http.MethodGet, path, nil))
		wantCode := want.Code
		if wantCode == http.StatusInternalServerError {
			wantCode = http.StatusServiceUnavailable
		}
		if got.Code != wantCode || got.Body.String() != want.Body.String() {
			t.Errorf("GET %s: %d %q, Kubernetes' %d %q", path, got.Code, got.Body.String(), want.Code, want.Body.String())
		}
		for _, h := range []string{"Content-Type", "X-Content-Type-Options"} {
			if got.Header().Get(h) != want.Header().Get(h) {
				t.Errorf("GET %s: %s %q, Kubernetes' %q", path, h, got.Header().Get(h), want.Header().Get(h))
			}
		}
	}
}

// TestChecksFollowState: each request asks the checks again; a name that
// was there at start and is gone fails with a reason.
func TestChecksFollowState(t *testing.T) {
	state := allOK
	h := newHandler(func() []Check { return state })
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	state = keyRejected
	if code, body := get("/readyz"); code != 503 {
		t.Errorf("after the key was rejected: %d %s", code, body)
	}
	state = allOK[1:]
	if code, body := get("/readyz/equinix-api"); code != 503 || body != "internal server error: check equinix-api is no longer reported\n" {
		t.Errorf("a check gone: %d %q", code, body)
	}
}

// TestServe: the listener answers both paths, and an address in use is an
// error naming the flag.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Serve(context.Background(), ln.Addr().String(), func() []Check { return allOK })
	if err == nil || !strings.Contains(err.Error(), "set --metal-readiness-address to a free address, or empty to turn it off") {
		t.Errorf("address in use: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Serve(ctx, addr, func() []Check { return keyRejected }); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/readyz": 503, "/livez": 200} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
