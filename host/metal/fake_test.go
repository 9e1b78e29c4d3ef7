package metal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

// fakeKey is recognisable so that tests can assert it never leaks.
const fakeKey = "FAKEKEY-d0n0tl3ak-7f3a9c"

const projectID = "11111111-2222-3333-4444-555555555555"

// fakeAPI is a tiny Equinix Metal API: each test registers the handlers it
// needs (by "METHOD /path" with the /metal/v1 prefix removed, path only) and
// reads the per-route counters. Unregistered routes answer 404.
type fakeAPI struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
	calls    map[string]int
	badAuth  int
}

func newFakeAPI(t testing.TB) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, handlers: map[string]http.HandlerFunc{}, calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + strings.TrimPrefix(r.URL.Path, "/metal/v1")
	f.mu.Lock()
	f.calls[key]++
	h := f.handlers[key]
	if r.Header.Get("X-Auth-Token") != fakeKey {
		f.badAuth++
	}
	f.mu.Unlock()
	if h == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"errors": []string{"Not found"}})
		return
	}
	h(w, r)
}

func (f *fakeAPI) handle(route string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[route] = h
}

func (f *fakeAPI) count(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[route]
}

func (f *fakeAPI) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

func (f *fakeAPI) resetCounts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.calls)
}

// client builds a Client against the fake with fast retries.
func (f *fakeAPI) client(mods ...func(*Options)) *Client {
	f.t.Helper()
	o := Options{
		BaseURL:      f.srv.URL + "/metal/v1",
		APIKey:       config.Secret(fakeKey),
		ProjectID:    projectID,
		Timeout:      5 * time.Second,
		Retries:      3,
		QPS:          1000,
		Burst:        1000,
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 20 * time.Millisecond,
	}
	for _, m := range mods {
		m(&o)
	}
	c, err := New(o)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// paged serves items in pages of per_page, with the API's meta block.
func paged(w http.ResponseWriter, r *http.Request, field string, items []map[string]any) {
	perPage := 10
	if v := r.URL.Query().Get("per_page"); v != "" {
		_, _ = fmt.Sscan(v, &perPage)
	}
	page := 1
	if v := r.URL.Query().Get("page"); v != "" {
		_, _ = fmt.Sscan(v, &page)
	}
	last := max(1, (len(items)+perPage-1)/perPage)
	lo := min(len(items), (page-1)*perPage)
	hi := min(len(items), lo+perPage)
	writeJSON(w, http.StatusOK, map[string]any{
		field:  items[lo:hi],
		"meta": map[string]any{"current_page": page, "last_page": last, "total": len(items)},
	})
}

func device(id, hostname string) map[string]any {
	return map[string]any{"id": id, "hostname": hostname, "state": "active"}
}

func reservation(id, address string, tags ...string) map[string]any {
	return map[string]any{
		"id": id, "type": "public_ipv4", "address": address, "network": address,
		"cidr": 32, "public": true, "tags": tags, "assignments": []any{},
		"created_at": "2026-01-01T00:00:00Z",
	}
}

// hijackClose drops the connection without an answer: a transport error.
func hijackClose(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}
