package metal

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics follow the CCM's one scheme (namespace equinix_metal, a subsystem
// for what is measured): this package measures the Equinix Metal API
// (equinix_metal_api_*) and its caches (equinix_metal_cache_*), so one
// dashboard query finds them all. Label values are bounded: the
// operation label takes one value per API operation (the labels in
// operations below), code is an HTTP status or "error" for a transport
// failure, cache is "devices" or "ip_reservations".
var (
	apiRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "equinix_metal", Subsystem: "api", Name: "requests_total",
		Help:           "HTTP requests sent to the Equinix Metal API, by operation and response code (\"error\" when no response arrived). Every retry is a request.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation", "code"})

	apiDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "equinix_metal", Subsystem: "api", Name: "request_duration_seconds",
		Help:           "Latency of one HTTP request to the Equinix Metal API until its response headers arrived, by operation.",
		Buckets:        []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})

	apiRetries = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "equinix_metal", Subsystem: "api", Name: "retries_total",
		Help:           "Requests to the Equinix Metal API that were sent again after a 429, a 5xx or a transport error, by operation.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})

	apiThrottle = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "equinix_metal", Subsystem: "api", Name: "rate_limiter_wait_seconds",
		Help:           "Time a request waited for the process-wide client-side rate limiter before it was sent, by operation.",
		Buckets:        []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})

	cacheRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "equinix_metal", Subsystem: "cache", Name: "requests_total",
		Help:           "Lookups in the Equinix Metal caches, by cache and result (hit: answered without an API call; miss: an API call was needed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cache", "result"})

	cacheRefreshes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "equinix_metal", Subsystem: "cache", Name: "refreshes_total",
		Help:           "Full re-reads of an Equinix Metal cache, by cache and result (success or error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cache", "result"})

	cacheObjects = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "cache", Name: "objects",
		Help:           "Objects held in an Equinix Metal cache.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cache"})
)

var registerOnce sync.Once

// registerMetrics adds the metrics to the legacy registry that the CCM's
// /metrics endpoint serves. It runs on the first New, not in init, so that a
// binary that never builds a client exports no empty Equinix series.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(apiRequests, apiDuration, apiRetries, apiThrottle,
			cacheRequests, cacheRefreshes, cacheObjects, keyRejected, authFailures, keyRotations, apiUnreachable)
	})
}

// Cache names used as the cache label.
const (
	cacheDevices      = "devices"
	cacheReservations = "ip_reservations"
)

func cacheHit(cache string)  { cacheRequests.WithLabelValues(cache, "hit").Inc() }
func cacheMiss(cache string) { cacheRequests.WithLabelValues(cache, "miss").Inc() }
