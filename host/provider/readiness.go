package provider

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/readiness"
)

// Readiness reports the checks of /readyz. A replica that is not the leader
// runs no loop yet; it is ready when its configuration, module and policies
// loaded (the module in the background: not ready while it compiles) and
// the API accepts the key, so that it can take over at once. The names
// depend on the configuration
// only, never on the state: /readyz serves a path per name (/readyz/module)
// from the names of its first call.
func (c *Cloud) Readiness() []readiness.Check {
	var checks []readiness.Check
	ok, why := c.metal.KeyAccepted()
	if ok {
		ok, why = c.metal.Reachable()
	}
	if ok {
		why = "the API answers and accepts the key (no 401 since the last successful call)"
	}
	checks = append(checks, readiness.Check{Name: "equinix-api", OK: ok, Reason: why})

	if c.lb != nil {
		m := readiness.Check{Name: "module", OK: true, Reason: "loaded; its loop runs on the leader"}
		if _, err, loading := c.module.state(); loading {
			m.OK, m.Reason = false, fmt.Sprintf("compiling (for %s; seconds on a cold compilation cache)", time.Since(c.module.began).Round(time.Second))
		} else if err != nil {
			m.OK, m.Reason = false, err.Error()
		} else if rec := c.reconciler.Load(); rec != nil {
			if err := rec.LastError(); err != nil {
				m.OK, m.Reason = false, "the last sync failed: "+err.Error()
			} else {
				m.Reason = "loaded; the last sync succeeded or none was needed yet"
			}
		}
		if w := c.moduleWatch; w != nil {
			if err := w.err(); err != nil {
				m.OK, m.Reason = false, err.Error()
			}
		}
		checks = append(checks, m)
		p := readiness.Check{Name: "policies", OK: true, Reason: "loaded and compiled (" + c.policies.Source() + ")"}
		if err := c.policies.LastReloadError(); err != nil {
			p.OK, p.Reason = false, err.Error()
		}
		checks = append(checks, p)
	}

	caches := readiness.Check{Name: "caches", OK: true, Reason: "not the leader; nothing to sync yet"}
	if env := c.env.Load(); env != nil {
		done := make(chan struct{})
		close(done) // report the state now, without waiting
		var pending []string
		for typ, synced := range env.informers.WaitForCacheSync(done) {
			if !synced {
				pending = append(pending, typ.String())
			}
		}
		sort.Strings(pending)
		if len(pending) > 0 {
			caches.OK, caches.Reason = false, fmt.Sprintf("informers not synced yet: %s", strings.Join(pending, ", "))
		} else {
			caches.Reason = "informers synced"
		}
	}
	return append(checks, caches)
}
