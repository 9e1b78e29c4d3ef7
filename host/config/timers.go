package config

import (
	"fmt"
	"maps"
	"time"
)

// The load-balancer module options that carry the BGP timers, as the
// MetalLB modules read them (modules/internal/metallb: holdTime,
// keepaliveTime; a user's module gets them too).
const (
	holdTimeParam      = "holdTime"
	keepaliveTimeParam = "keepaliveTime"
	// defaultHoldTime is MetalLB's own, for the keepalive check when no
	// hold time is set.
	defaultHoldTime = 90
)

// bgpTimers checks bgpHoldTime and bgpKeepaliveTime and passes them to
// the load-balancer module as options, as if the loadbalancer URL had
// them: one path to the module whichever way the user set them. A URL
// that already has the option with another value is an error naming both.
// The ranges are BGP's (RFC 4271) and MetalLB's: Equinix's documentation
// says nothing of the timers its routers accept.
func (v *validator) bgpTimers(c *Config) {
	hold, okHold := v.wholeSeconds("bgpHoldTime", c.BGPHoldTime)
	keep, okKeep := v.wholeSeconds("bgpKeepaliveTime", c.BGPKeepaliveTime)
	if okHold && hold != 0 && (hold < 3 || hold > 65535) {
		v.add("bgpHoldTime", "%s is out of range; use 3s to 65535s (0, BGP's \"never\", would keep a dead node's routes for ever)", c.BGPHoldTime)
		okHold = false
	}
	limit := hold
	if limit == 0 {
		limit = defaultHoldTime
	}
	if okHold && okKeep && keep != 0 && keep >= limit {
		v.add("bgpKeepaliveTime", "%s must be shorter than the hold time (%ds); use at most a third of it", c.BGPKeepaliveTime, limit)
		okKeep = false
	}
	for _, t := range []struct {
		key, param string
		secs       int
		ok         bool
	}{{"bgpHoldTime", holdTimeParam, hold, okHold}, {"bgpKeepaliveTime", keepaliveTimeParam, keep, okKeep}} {
		if !t.ok || t.secs == 0 {
			continue
		}
		val := fmt.Sprintf("%ds", t.secs)
		if cur, ok := c.LB.Options[t.param]; ok && cur != val {
			v.add(t.key, "%s disagrees with the loadbalancer URL's %s=%s; set one of the two", val, t.param, cur)
			continue
		}
		if c.LB.Kind == LBNone {
			continue // no load balancer, no BGP speaker to tell
		}
		c.LB.Options = maps.Clone(c.LB.Options)
		if c.LB.Options == nil {
			c.LB.Options = map[string]string{}
		}
		c.LB.Options[t.param] = val
	}
}

// wholeSeconds is d in seconds, reporting a duration that is not a whole,
// non-negative number of them.
func (v *validator) wholeSeconds(key string, d time.Duration) (int, bool) {
	if d < 0 || d%time.Second != 0 {
		v.add(key, "%s is not a whole number of seconds; use for example 9s", d)
		return 0, false
	}
	return int(d / time.Second), true
}
