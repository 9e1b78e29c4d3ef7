package bgp

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// reasonPrefixLimit warns that every BGP node announces more Service
// addresses than Equinix's per-session prefix limit (upstream issue #457):
// past it, the routers drop the whole session, not just the extra prefixes.
const reasonPrefixLimit = "BGPPrefixLimitExceeded"

var (
	announcedPrefixes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "bgp", Name: "announced_prefixes",
		Help: "Service addresses each BGP node announces.", StabilityLevel: metrics.ALPHA,
	})
	prefixLimit = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "bgp", Name: "prefix_limit",
		Help: "Configured per-session prefix limit (bgpMaxPrefixes).", StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// PrefixBudget watches the number of Service addresses every BGP node
// announces against the session limit.
type PrefixBudget struct {
	limit    int
	recorder record.EventRecorder
	mu       sync.Mutex
	exceeded map[string]bool // nodes already warned
}

// NewPrefixBudget registers the BGP prefix metrics (once per process) and
// returns a budget of limit prefixes per session.
func NewPrefixBudget(limit int, recorder record.EventRecorder) *PrefixBudget {
	registerOnce.Do(func() { legacyregistry.MustRegister(announcedPrefixes, prefixLimit) })
	return &PrefixBudget{limit: limit, recorder: recorder}
}

// Check warns once per node when the addresses every BGP node announces
// exceed the session limit, and again if it recovers and exceeds anew.
func (b *PrefixBudget) Check(addresses int, nodes []string) {
	announcedPrefixes.Set(float64(addresses))
	prefixLimit.Set(float64(b.limit))
	b.mu.Lock()
	defer b.mu.Unlock()
	if addresses <= b.limit {
		b.exceeded = nil
		return
	}
	if b.exceeded == nil {
		b.exceeded = map[string]bool{}
	}
	for _, n := range nodes {
		if b.exceeded[n] {
			continue
		}
		b.exceeded[n] = true
		ref := &v1.ObjectReference{Kind: "Node", Name: n, UID: types.UID(n)}
		b.recorder.Eventf(ref, v1.EventTypeWarning, reasonPrefixLimit,
			"This node announces %d Service addresses over BGP, more than the session limit of %d; Equinix Metal drops sessions past the limit: ask Equinix to raise it and set bgpMaxPrefixes, or use fewer LoadBalancer Services; bgpMaxPrefixesAction=refuse refuses new Elastic IPs past the limit instead", addresses, b.limit)
	}
	klog.InfoS("BGP prefix limit exceeded", "announced", addresses, "limit", b.limit)
}
