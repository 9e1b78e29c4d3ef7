// Package readiness serves /readyz: whether this CCM can do its work now,
// check by check, each with its reason, so that `kubectl describe pod` and
// a person with curl see why a replica is not ready.
//
// It is apart from /healthz (liveness, on the secure port): a rejected API
// key or a failing module makes the CCM unready, but restarting it would
// not help, so liveness stays as it is.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Check is one condition and its state.
type Check struct {
	Name   string
	OK     bool
	Reason string
}

// handler answers 200 when every check passes and 503 otherwise, with one
// line per check: "ok <name>: <reason>" or "failed <name>: <reason>".
func handler(checks func() []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		ready := true
		for _, c := range checks() {
			state := "ok"
			if !c.OK {
				state, ready = "failed", false
			}
			fmt.Fprintf(&b, "%s %s: %s\n", state, c.Name, c.Reason)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			b.WriteString("not ready\n")
		} else {
			b.WriteString("ready\n")
		}
		_, _ = w.Write([]byte(b.String()))
	})
}

// Serve serves /readyz on addr until ctx ends. It returns an error at once
// when addr cannot be listened on.
func Serve(ctx context.Context, addr string, checks func() []Check) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("readiness endpoint: %w; set --metal-readiness-address to a free address, or empty to turn it off", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/readyz", handler(checks))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Readiness endpoint stopped")
		}
	}()
	klog.InfoS("Serving readiness", "address", ln.Addr().String(), "path", "/readyz")
	return nil
}
