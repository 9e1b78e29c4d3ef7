// Package readiness serves /readyz and /livez on a plain-HTTP listener of
// their own, in Kubernetes' format: the handlers are k8s.io/apiserver's
// healthz package, as in every control-plane component, so `?verbose`,
// `?exclude=<check>`, one path per check (/readyz/<check>) and the lines
// ("[+]<check> ok", "[-]<check> failed: reason withheld", "readyz check
// passed") are Kubernetes' own, and tools made for those work here.
//
// /readyz says whether this CCM can do its work now, check by check
// (host/provider's Readiness: the Equinix API, the module, the policies,
// the caches). Kubernetes' format withholds a failing check's reason from
// /readyz; /readyz/<check> answers it ("internal server error: <reason>"),
// and each failure is also in the log when it starts (and an Event for the
// module's and the policies'), and in every failed probe's log line at
// --v=2. The kubelet shows none of it in `kubectl describe pod`: it reports
// a failed HTTP probe by its status code only.
//
// /livez is ping and log (the logger is not blocked), and never follows the
// readiness checks: a rejected API key, an unreachable API or a failing
// module makes the CCM unready, but restarting it would not help. The
// Deployment's liveness probe stays the secure port's /healthz, which has
// the leader-election watchdog this listener cannot see.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
)

// Check is one condition and its state.
type Check struct {
	Name   string
	OK     bool
	Reason string
}

// newHandler serves /readyz with one check per name that checks reports
// now, /livez with ping and log, and each check under its own path.
func newHandler(checks func() []Check) http.Handler {
	mux := http.NewServeMux()
	healthz.InstallReadyzHandler(mux, readyChecks(checks)...)
	healthz.InstallLivezHandler(mux, healthz.PingHealthz, healthz.LogHealthz)
	return unavailable(mux)
}

// readyChecks turns the checks into healthz's, a named one each, which
// asks checks for its own state at every request. The set of names is
// taken once: healthz installs a path per name, so checks must report the
// same names for the life of the process (host/provider's depend on the
// configuration only).
func readyChecks(checks func() []Check) []healthz.HealthChecker {
	var out []healthz.HealthChecker
	for _, c := range checks() {
		name := c.Name
		out = append(out, healthz.NamedCheck(name, func(*http.Request) error { return stateOf(checks(), name) }))
	}
	return out
}

// stateOf is name's check as healthz wants it: nil when it passes, else
// its reason.
func stateOf(checks []Check, name string) error {
	for _, c := range checks {
		switch {
		case c.Name != name:
		case c.OK:
			return nil
		case c.Reason == "":
			return errors.New("failed")
		default:
			return errors.New(c.Reason)
		}
	}
	return fmt.Errorf("check %s is no longer reported", name)
}

// unavailable answers 503 Service Unavailable where healthz answers 500 (a
// failed check), the body and headers unchanged. 503 is what /readyz has
// always answered when not ready, and what "not ready" means in HTTP;
// probes and tools made for Kubernetes' format tell a pass from a failure
// by 2xx or not, and read the body, which is healthz's byte for byte.
func unavailable(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(statusWriter{w}, r)
	})
}

type statusWriter struct{ http.ResponseWriter }

func (w statusWriter) WriteHeader(code int) {
	if code == http.StatusInternalServerError {
		code = http.StatusServiceUnavailable
	}
	w.ResponseWriter.WriteHeader(code)
}

// Serve serves /readyz and /livez (and their per-check paths) on addr
// until ctx ends. It returns an error at once when addr cannot be listened
// on.
func Serve(ctx context.Context, addr string, checks func() []Check) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("readiness endpoint: %w; set --metal-readiness-address to a free address, or empty to turn it off", err)
	}
	srv := &http.Server{Handler: newHandler(checks), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Readiness endpoint stopped")
		}
	}()
	klog.InfoS("Serving readiness and liveness", "address", ln.Addr().String(), "paths", []string{"/readyz", "/livez"})
	return nil
}
