package emulator

import (
	"sync"
	"sync/atomic"
)

// RouteStats is what happened on one route since the last reset.
type RouteStats struct {
	// Requests is every request that reached the route, whatever the answer
	// (faults, auth failures and resets included).
	Requests int64 `json:"requests"`
	// Statuses counts the answers by HTTP status; a reset connection
	// counts as status 0.
	Statuses map[int]int64 `json:"statuses,omitempty"`
}

type routeCounter struct {
	requests atomic.Int64
	mu       sync.Mutex
	statuses map[int]int64
}

type counters struct {
	routes map[Route]*routeCounter // fixed at construction; read without a lock
	total  atomic.Int64
}

func newCounters() *counters {
	c := &counters{routes: map[Route]*routeCounter{}}
	for _, r := range append(Routes(), RouteUnmatched) {
		c.routes[r] = &routeCounter{statuses: map[int]int64{}}
	}
	return c
}

func (c *counters) arrive(r Route) {
	c.routes[r].requests.Add(1)
	c.total.Add(1)
}

func (c *counters) answered(r Route, status int) {
	rc := c.routes[r]
	rc.mu.Lock()
	rc.statuses[status]++
	rc.mu.Unlock()
}

func (c *counters) reset() {
	for _, rc := range c.routes {
		rc.mu.Lock()
		rc.requests.Store(0)
		clear(rc.statuses)
		rc.mu.Unlock()
	}
	c.total.Store(0)
}

func (c *counters) stats() map[Route]RouteStats {
	out := map[Route]RouteStats{}
	for r, rc := range c.routes {
		rc.mu.Lock()
		n := rc.requests.Load()
		if n > 0 || len(rc.statuses) > 0 {
			st := RouteStats{Requests: n, Statuses: map[int]int64{}}
			for k, v := range rc.statuses {
				st.Statuses[k] = v
			}
			out[r] = st
		}
		rc.mu.Unlock()
	}
	return out
}
