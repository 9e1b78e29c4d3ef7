package config

import (
	"fmt"
	"maps"
	"time"
)

// The load-balancer module options that carry the BGP timers and BFD, as
// the MetalLB modules read them (modules/internal/metallb: holdTime,
// keepaliveTime, bfdInterval, bfdMultiplier; a user's module gets them
// too).
const (
	holdTimeParam      = "holdTime"
	keepaliveTimeParam = "keepaliveTime"
	bfdIntervalParam   = "bfdInterval"
	bfdMultiplierParam = "bfdMultiplier"
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
		if t.ok && t.secs != 0 {
			v.toModule(c, t.key, t.param, fmt.Sprintf("%ds", t.secs))
		}
	}
}

// bgpBFD checks bgpBFDInterval and bgpBFDMultiplier and passes them to the
// load-balancer module as its bfdInterval and bfdMultiplier options, as
// bgpTimers does the timers. The ranges are MetalLB's BFDProfile's;
// Equinix's documentation says nothing of BFD at its routers.
func (v *validator) bgpBFD(c *Config) {
	d := c.BGPBFDInterval
	switch {
	case d < 0 || d%time.Millisecond != 0:
		v.add("bgpBFDInterval", "%s is not a whole number of milliseconds; use for example 300ms", d)
		return
	case d != 0 && (d < 10*time.Millisecond || d > time.Minute):
		v.add("bgpBFDInterval", "%s is out of range; use 10ms to 60s, or 0s for no BFD", d)
		return
	}
	if m := c.BGPBFDMultiplier; m != 0 && (m < 2 || m > 255) {
		v.add("bgpBFDMultiplier", "%d is out of range; use 2 to 255 (0: the speaker's default, 3)", m)
		return
	} else if m != 0 && d == 0 {
		v.add("bgpBFDMultiplier", "%d is set but BFD is off; set bgpBFDInterval (for example 300ms) to turn it on", m)
		return
	}
	if d != 0 {
		v.toModule(c, "bgpBFDInterval", bfdIntervalParam, fmt.Sprintf("%dms", d/time.Millisecond))
	}
	if c.BGPBFDMultiplier != 0 {
		v.toModule(c, "bgpBFDMultiplier", bfdMultiplierParam, fmt.Sprint(c.BGPBFDMultiplier))
	}
}

// toModule passes option key's value val to the load-balancer module as
// its option param, as if the loadbalancer URL had it: one path to the
// module whichever way the user set it. A URL that already has the
// option with another value is an error naming both.
func (v *validator) toModule(c *Config, key, param, val string) {
	if cur, ok := c.LB.Options[param]; ok && cur != val {
		v.add(key, "%s disagrees with the loadbalancer URL's %s=%s; set one of the two", val, param, cur)
		return
	}
	if c.LB.Kind == LBNone {
		return // no load balancer, no BGP speaker to tell
	}
	c.LB.Options = maps.Clone(c.LB.Options)
	if c.LB.Options == nil {
		c.LB.Options = map[string]string{}
	}
	c.LB.Options[param] = val
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
