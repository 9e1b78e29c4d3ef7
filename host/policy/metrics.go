package policy

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metric label values of the two decisions.
const (
	decisionPlacement = "placement"
	decisionSelection = "selection"
)

// The metrics live in the legacy registry because that is what the CCM's
// /metrics endpoint (k8s.io/cloud-provider) serves. They are shared by all
// engines of the process; in practice there is one.
var (
	decisionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "equinix_metal",
		Subsystem:      "policy",
		Name:           "decisions_total",
		Help:           "Policy evaluations, by decision (placement, selection).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"decision"})
	denialsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "equinix_metal",
		Subsystem:      "policy",
		Name:           "denials_total",
		Help:           "Policy evaluations whose deny set was not empty, by decision.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"decision"})
	errorsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "equinix_metal",
		Subsystem:      "policy",
		Name:           "errors_total",
		Help:           "Policy evaluations that gave no usable decision, by decision and reason (undefined, invalid, evaluation, timeout).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"decision", "reason"})
	evalDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "equinix_metal",
		Subsystem:      "policy",
		Name:           "evaluation_duration_seconds",
		Help:           "Time of one policy evaluation, including building its input, by decision.",
		Buckets:        metrics.ExponentialBuckets(0.00001, 4, 10), // 10µs .. 2.6s
		StabilityLevel: metrics.ALPHA,
	}, []string{"decision"})
	reloadsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "equinix_metal",
		Subsystem:      "policy",
		Name:           "reloads_total",
		Help:           "Reloads of the mounted policy directory, by result (success, failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	reloadFailing = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "equinix_metal",
		Subsystem:      "policy",
		Name:           "reload_failing",
		Help:           "1 while the last reload of the policy directory failed and the previous policies are still in use, else 0.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

// registerMetrics registers the metrics once per process. Unregistered
// component-base metrics silently record nothing, so Load calls this.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(decisionsTotal, denialsTotal, errorsTotal, evalDuration, reloadsTotal, reloadFailing)
	})
}

// errorReason is the errors_total reason label of a failed decision.
func errorReason(kind error) string {
	switch kind {
	case errUndefined:
		return "undefined"
	case ErrInvalidDecision:
		return "invalid"
	case ErrTimeout:
		return "timeout"
	default:
		return "evaluation"
	}
}
