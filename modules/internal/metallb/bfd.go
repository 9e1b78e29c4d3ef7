package metallb

import (
	"fmt"
	"strconv"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// The module parameters of BFD (query parameters of the loadbalancer URL,
// or the CCM's bgpBFDInterval and bgpBFDMultiplier, which the host passes
// as these). BFD tells a router within a fraction of a second that a node
// stopped answering, where the BGP hold time takes seconds: the router
// then drops the node's routes at once (and, unlike a hold timer running
// out, keeps no graceful-restart copy of them). Only MetalLB's FRR-based
// speakers (bgpType frr or frr-k8s) run BFD.
const (
	BFDIntervalParam   = "bfdInterval"
	BFDMultiplierParam = "bfdMultiplier"
	// BFDProfileName is the BFDProfile the CRD module writes and its
	// BGPPeers name.
	BFDProfileName = "equinix-metal-bfd"
	// DefaultBFDMultiplier is FRR's and MetalLB's: three lost packets in a
	// row and the peer is down.
	DefaultBFDMultiplier = 3
	// BFDMinimumTTL is the least TTL a multihop BFD packet may arrive
	// with. FRR's default, 254, expects peers to send at 255 from at most
	// one hop away; BIRD sends multihop BFD at the system's default TTL
	// (64 on Linux), Equinix's documentation does not say what its routers
	// send, and RFC 5883 leaves the TTL of multihop BFD unchecked (it is
	// no defence across hops). So any TTL is taken, and the session comes
	// up whatever the routers send.
	BFDMinimumTTL = 1
)

// BFD is what the options ask of BFD: the interval in milliseconds at
// which each side sends and expects a packet (zero: BFD off) and how many
// may be missed before the peer is down.
type BFD struct{ IntervalMs, Multiplier int }

// On reports whether BFD is asked for.
func (b BFD) On() bool { return b.IntervalMs != 0 }

// BFDFrom reads and checks the BFD parameters. The ranges are MetalLB's
// (its BFDProfile CRD): an interval of 10 ms to 60 s in whole
// milliseconds, a multiplier of 2 to 255.
func BFDFrom(o sdk.Options) (BFD, error) {
	var b BFD
	if v := o.Params[BFDIntervalParam]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d%time.Millisecond != 0 {
			return b, fmt.Errorf("%s %q is not a whole number of milliseconds; write it as 300ms or 1s", BFDIntervalParam, v)
		}
		if d < 10*time.Millisecond || d > time.Minute {
			return b, fmt.Errorf("%s %s is out of range; use 10ms to 60s", BFDIntervalParam, v)
		}
		b.IntervalMs = int(d / time.Millisecond)
	}
	if v := o.Params[BFDMultiplierParam]; v != "" {
		if !b.On() {
			return b, fmt.Errorf("%s %s is set without %s; set %s (for example 300ms) to turn BFD on", BFDMultiplierParam, v, BFDIntervalParam, BFDIntervalParam)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > 255 {
			return b, fmt.Errorf("%s %q is out of range; use a whole number from 2 to 255", BFDMultiplierParam, v)
		}
		b.Multiplier = n
	}
	if b.On() && b.Multiplier == 0 {
		b.Multiplier = DefaultBFDMultiplier
	}
	return b, nil
}
