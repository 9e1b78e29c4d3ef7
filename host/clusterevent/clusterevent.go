// Package clusterevent reports failures that concern the whole cluster,
// not one object: a load-balancer module that fails, a placement policy
// that cannot be evaluated, a mounted module or policy file that fails to
// reload. Such a failure hits every Service at once and
// is retried; recorded on each Service at each retry it becomes thousands
// of identical Warnings that bury everything else (and cost a write each).
// A Reporter records it once per cause instead, on one cluster-level
// object, and again only when the cause changes, after a success, or after
// Repeat (so a lasting failure stays visible past the Events' TTL).
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package clusterevent

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/clock"
)

var (
	reported = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "equinix_metal_cluster_failures_reported_total",
		Help:           "Cluster-wide failures (a failing load-balancer module, a placement policy that cannot be evaluated, a mounted module or policy file that fails to reload) recorded as a Warning Event, by the Event's reason: once per cause, not per Service or per retry.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	registerOnce sync.Once
)

// object is what cluster-wide Events are recorded on: the kube-system
// Namespace, which every cluster has (`kubectl get events -A
// --field-selector involvedObject.kind=Namespace` lists them).
var object = &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: metav1.NamespaceSystem}

// defaultRepeat is how often a failure that keeps its cause is recorded
// again: the apiserver drops Events after an hour by default
// (--event-ttl).
const defaultRepeat = 50 * time.Minute

// eventRecorder is the part of client-go's record.EventRecorder used here.
type eventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Reporter records one failure Event per cause. The zero value is not
// usable; set at least Reason. Safe for concurrent use.
type Reporter struct {
	// Recorder receives the Events; nil records none (Failed still
	// deduplicates, for the caller's log line and metric).
	Recorder eventRecorder
	// Object is what the Events are on; nil is object.
	Object *corev1.ObjectReference
	// Reason is the Warning's reason; RecoveredReason, if set, is that of
	// the Normal Event recorded on the first success after a failure, with
	// RecoveredMessage.
	Reason, RecoveredReason, RecoveredMessage string
	// Repeat defaults to defaultRepeat; Clock to the real clock.
	Repeat time.Duration
	Clock  clock.PassiveClock

	mu       sync.Mutex
	last     string // the cause last reported; "" when healthy
	lastTime time.Time
}

// Failed reports a failure with the given cause (what tells two failures
// apart: a reason, or a reason and a message) and message. It returns true
// when it recorded it, false for a repeat of the cause already reported.
func (r *Reporter) Failed(cause, message string) bool {
	now := r.now()
	repeat := r.Repeat
	if repeat == 0 {
		repeat = defaultRepeat
	}
	r.mu.Lock()
	if cause == r.last && now.Sub(r.lastTime) < repeat {
		r.mu.Unlock()
		return false
	}
	r.last, r.lastTime = cause, now
	r.mu.Unlock()
	registerOnce.Do(func() { legacyregistry.MustRegister(reported) })
	reported.WithLabelValues(r.Reason).Inc()
	r.record(warning, r.Reason, message)
	return true
}

// Succeeded ends a failure: the next one is reported whatever its cause.
// It returns true when a failure had been reported (and records the
// recovery Event, if there is a RecoveredReason).
func (r *Reporter) Succeeded() bool {
	r.mu.Lock()
	was := r.last
	r.last = ""
	r.mu.Unlock()
	if was == "" {
		return false
	}
	if r.RecoveredReason != "" {
		r.record(normal, r.RecoveredReason, r.RecoveredMessage)
	}
	return true
}

// The Event types, named so that the reasons (the callers' constants,
// which docs/events.md lists) are checked where they are defined.
const warning, normal = corev1.EventTypeWarning, corev1.EventTypeNormal

// record records an Event.
func (r *Reporter) record(eventtype, reason, message string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(r.object(), eventtype, reason, "%s", message)
	}
}

func (r *Reporter) object() *corev1.ObjectReference {
	if r.Object != nil {
		return r.Object
	}
	return object
}

func (r *Reporter) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}
