package metal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
)

// UnreachableAfter is how long calls must have failed without any answer
// from the API (transport errors, time-outs, 5xx) before readiness says the
// API is unreachable. A few failed calls are normal and retried; this is
// for an outage, or a base-url or network policy that reaches nothing.
var UnreachableAfter = 30 * time.Second

var apiUnreachable = metrics.NewGauge(&metrics.GaugeOpts{
	Name:           "equinix_metal_api_unreachable",
	Help:           "1 while calls to the Equinix Metal API have failed without an answer (transport error, time-out or 5xx) for longer than 30s, else 0.",
	StabilityLevel: metrics.ALPHA,
})

// answersAgainAfter is how long a streak of failed calls must have lasted
// for its end to run the OnAnswersAgain hooks: as long as k8s.io/cloud-
// provider's service controller waits before its first retry (5 s). A
// shorter streak cost its callers no more than that wait, and an API that
// fails every other call would otherwise run the hooks again and again.
const answersAgainAfter = 5 * time.Second

// reachState follows whether the API answers. Any answer below 500 (a 4xx
// too: the API is there and says no) ends a streak of failures.
type reachState struct {
	mu       sync.Mutex
	since    time.Time // first failure of the current streak; zero when none
	failures int
	last     string    // the last failure, for the reason
	down     bool      // logged and gauged as unreachable
	lastCall time.Time // the last call observed, failed or not
	hooks    []func()  // OnAnswersAgain
	now      func() time.Time
}

func newReachState() *reachState { return &reachState{now: time.Now} }

// observe records one call's outcome. Calls held back for a rejected key
// or ended by their own context say nothing about reachability.
func (r *reachState) observe(ctx context.Context, resp *http.Response, err error) {
	if ctx.Err() != nil || errors.Is(err, errKeyRejected) {
		return
	}
	failed := err != nil || resp == nil || resp.StatusCode >= 500
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastCall = r.now()
	if !failed {
		if r.down {
			klog.FromContext(ctx).Info("The Equinix Metal API answers again", "failedCalls", r.failures)
			apiUnreachable.Set(0)
		}
		if r.failures > 0 && r.now().Sub(r.since) >= answersAgainAfter {
			// In their own goroutine: this is a call's transport, and a
			// hook may make calls of its own.
			for _, h := range r.hooks {
				go h()
			}
		}
		r.since, r.failures, r.last, r.down = time.Time{}, 0, "", false
		return
	}
	if r.failures == 0 {
		r.since = r.now()
	}
	r.failures++
	if err != nil {
		r.last = err.Error()
	} else if resp != nil {
		r.last = resp.Status
	}
	if !r.down && r.now().Sub(r.since) >= UnreachableAfter {
		r.down = true
		apiUnreachable.Set(1)
		klog.FromContext(ctx).Error(nil, "The Equinix Metal API does not answer; check the network path to it (base-url, proxy, network policy) and its status page",
			"since", r.since.UTC().Format(time.RFC3339), "failedCalls", r.failures, "lastError", r.last)
	}
}

// status reports whether the API answers, and if not, why.
func (r *reachState) status() (ok bool, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures == 0 || r.now().Sub(r.since) < UnreachableAfter {
		return true, ""
	}
	return false, fmt.Sprintf("the Equinix Metal API has not answered since %s (%d calls failed; the last: %s)",
		r.since.UTC().Format(time.RFC3339), r.failures, r.last)
}

// onAnswersAgain adds f to what runs when a streak of failures ends.
func (r *reachState) onAnswersAgain(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hooks = append(r.hooks, f)
}

// probeDue reports whether calls are failing and none was made for idle:
// then nothing would notice the API answering again until the next call,
// which may be minutes away (the callers back off).
func (r *reachState) probeDue(idle time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures > 0 && r.now().Sub(r.lastCall) >= idle
}

// Reachable reports whether the API answered recently enough, as far as
// the last calls tell, and if not, why.
func (c *Client) Reachable() (bool, string) { return c.reach.status() }

// OnAnswersAgain registers f to run, in a goroutine of its own, each time
// the API answers after calls had failed without an answer for at least
// answersAgainAfter: the place to retry at once what waited on the API
// (host/lbretry: the Services whose sync failed meanwhile, which the
// service controller would otherwise retry only after its backoff, up to
// 5 minutes). Run probes the API while calls fail, so the end of an
// outage is noticed within probeEvery even when nothing else calls.
func (c *Client) OnAnswersAgain(f func()) { c.reach.onAnswersAgain(f) }

// probeEvery is how often Run asks the API one cheap question (the
// project's BGP configuration) while calls fail and no other call was
// made meanwhile: what waited on the API waits at most about twice this
// once it answers, at the price of 12 failing calls a minute during an
// outage.
const probeEvery = 5 * time.Second

// probeWhileFailing is Run's prober (see OnAnswersAgain).
func (c *Client) probeWhileFailing(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.reach.probeDue(probeEvery) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, probeEvery)
		// Only its effect on reachState counts: an answer (even "BGP
		// not enabled") ends the streak.
		_, _ = c.ProjectBGPConfig(pctx)
		cancel()
	}
}
