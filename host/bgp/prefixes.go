package bgp

import (
	"sort"
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
		Help: "The most Service addresses any BGP node announces (an Elastic IP is announced only by the nodes of its metro or facility).", StabilityLevel: metrics.ALPHA,
	})
	prefixLimit = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "bgp", Name: "prefix_limit",
		Help: "Configured per-session prefix limit (bgpMaxPrefixes).", StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// PrefixBudget watches the number of Service addresses each BGP node
// announces against the session limit.
type PrefixBudget struct {
	limit    int
	recorder record.EventRecorder
	mu       sync.Mutex
	exceeded map[string]bool // nodes warned and still over the limit
}

// NewPrefixBudget registers the BGP prefix metrics (once per process) and
// returns a budget of limit prefixes per session.
func NewPrefixBudget(limit int, recorder record.EventRecorder) *PrefixBudget {
	registerOnce.Do(func() { legacyregistry.MustRegister(announcedPrefixes, prefixLimit) })
	return &PrefixBudget{limit: limit, recorder: recorder}
}

// Check takes, per BGP node, the Service addresses it announces (an
// Elastic IP only from the nodes of its metro or facility, so nodes of
// different metros differ), and warns a node once when its count exceeds
// the session limit, again if it went under and exceeds anew.
func (b *PrefixBudget) Check(announced map[string]int) {
	most := 0
	for _, n := range announced {
		most = max(most, n)
	}
	announcedPrefixes.Set(float64(most))
	prefixLimit.Set(float64(b.limit))
	b.mu.Lock()
	defer b.mu.Unlock()
	over := map[string]bool{}
	nodes := make([]string, 0, len(announced))
	for n := range announced {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		count := announced[n]
		if count <= b.limit {
			continue
		}
		over[n] = true
		if b.exceeded[n] {
			continue
		}
		ref := &v1.ObjectReference{Kind: "Node", Name: n, UID: types.UID(n)}
		b.recorder.Eventf(ref, v1.EventTypeWarning, reasonPrefixLimit,
			"This node announces %d Service addresses over BGP, more than the session limit of %d; Equinix Metal drops sessions past the limit: ask Equinix to raise it and set bgpMaxPrefixes, or use fewer LoadBalancer Services in this node's metro; bgpMaxPrefixesAction=refuse refuses new Elastic IPs past the limit instead", count, b.limit)
	}
	if len(over) > 0 {
		klog.InfoS("BGP prefix limit exceeded", "mostAnnounced", most, "limit", b.limit, "nodesOver", len(over))
	}
	b.exceeded = over
}
