package controlplane

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics are registered in the component-base legacy registry, which the
// cloud-controller-manager serves on /metrics. Node names are label values:
// a cluster has a handful of control-plane nodes, so the cardinality stays
// small.
var (
	metricHolder = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "controlplane", Name: "eip_holder",
		Help:           "1 for the control-plane node that holds the control-plane EIP (node \"\" when the holder is not a known node).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"node"})
	metricAssignments = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "controlplane", Name: "eip_assignments",
		Help:           "Number of assignments of the control-plane EIP as last read from Equinix Metal; 1 is the only good value.",
		StabilityLevel: metrics.ALPHA,
	})
	metricProbes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "equinix_metal", Subsystem: "controlplane", Name: "probes_total",
		Help:           "Health probes of kube-apiservers, by target (\"eip\" or a node name) and result (success, failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"target", "result"})
	metricHealthyNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "controlplane", Name: "healthy_nodes",
		Help:           "Control-plane nodes whose kube-apiserver passed its last probe.",
		StabilityLevel: metrics.ALPHA,
	})
	metricFailovers = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "equinix_metal", Subsystem: "controlplane", Name: "failovers_total",
		Help:           "Changes of the control-plane EIP's assignment made by this CCM, by cause.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cause"})
	metricFailoverErrors = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "equinix_metal", Subsystem: "controlplane", Name: "failover_errors_total",
		Help:           "Unassign or assign calls that failed; the next round repairs what they left.",
		StabilityLevel: metrics.ALPHA,
	})
	metricFailoverSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "equinix_metal", Subsystem: "controlplane", Name: "failover_duration_seconds",
		Help:           "From the holder's first failed probe to the EIP's new assignment.",
		Buckets:        []float64{0.5, 1, 2, 3, 4, 5, 7.5, 10, 15, 30, 60},
		StabilityLevel: metrics.ALPHA,
	})
	metricStuck = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "controlplane", Name: "eip_stuck",
		Help:           "1 while the EIP should move (or be assigned) but no control-plane node is eligible.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricHolder, metricAssignments, metricProbes, metricHealthyNodes,
			metricFailovers, metricFailoverErrors, metricFailoverSeconds, metricStuck)
	})
}
