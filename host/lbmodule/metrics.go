package lbmodule

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsNamespace, metricsSubsystem = "equinix_metal", "lbmodule"

var (
	syncsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "syncs_total",
		Help:           "Load-balancer config syncs (generate, validate, apply, prune) by result: success, or the failure reason (trap, deadline, memory, module_error, invalid_output, forbidden_output, apply, snapshot).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	generateDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "generate_duration_seconds",
		Help:           "Duration of one module generate call, including instantiation and output validation.",
		Buckets:        []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		StabilityLevel: metrics.ALPHA,
	})
	// syncPhaseDuration says where a sync's time goes: a new Service's
	// pool (and MetalLB's allocation, and its first packet) waits for the
	// sync in flight and then its own, so a slow phase is every new
	// Service's wait.
	syncPhaseDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "sync_phase_duration_seconds",
		Help:           "Duration of each phase of one sync: snapshot (the module's input), read (the objects the module reads), generate (the module call), live (listing the objects the CCM owns), write (server-side apply of the changed ones), prune (deleting the unwanted), annotations (nodes' module annotations).",
		Buckets:        []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		StabilityLevel: metrics.ALPHA,
	}, []string{"phase"})
	objectsApplied = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "objects_applied_total",
		Help: "Objects applied with server-side apply for the module.", StabilityLevel: metrics.ALPHA,
	})
	objectsPruned = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "objects_pruned_total",
		Help: "Owned objects deleted because the module no longer wants them.", StabilityLevel: metrics.ALPHA,
	})
	healthy = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "healthy",
		Help: "1 if the last sync succeeded, 0 if the cluster holds the last good state because it failed.", StabilityLevel: metrics.ALPHA,
	})
	lastSuccess = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "last_success_timestamp_seconds",
		Help: "Unix time of the last successful sync.", StabilityLevel: metrics.ALPHA,
	})
	moduleReloads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "reloads_total",
		Help:           "Loads of a changed module file while running, by result (success, failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	moduleReloadFailing = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "reload_failing",
		Help:           "1 while the module file changed but fails to load and the previous module is still in use, else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncsTotal, generateDuration, syncPhaseDuration, objectsApplied, objectsPruned, healthy, lastSuccess, moduleReloads, moduleReloadFailing)
	})
}

// RecordReload counts one load of a changed module file and sets the
// reload_failing gauge (see provider's module watch).
func RecordReload(err error) {
	registerMetrics()
	if err != nil {
		moduleReloads.WithLabelValues("failure").Inc()
		moduleReloadFailing.Set(1)
		return
	}
	moduleReloads.WithLabelValues("success").Inc()
	moduleReloadFailing.Set(0)
}
