package readiness

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		checks []Check
		code   int
		want   []string
	}{
		{"all ok", []Check{{"equinix-api", true, "key accepted"}, {"caches", true, "synced"}}, 200, []string{"ok equinix-api: key accepted", "ok caches: synced", "ready"}},
		{"one failing", []Check{{"equinix-api", false, "401 since 10:00"}, {"caches", true, "synced"}}, 503, []string{"failed equinix-api: 401 since 10:00", "ok caches: synced", "not ready"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			handler(func() []Check { return tc.checks }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tc.code {
				t.Errorf("code %d, want %d", rec.Code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("body lacks %q:\n%s", w, rec.Body.String())
				}
			}
		})
	}
}
