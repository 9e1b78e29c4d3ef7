package lbmodule

import (
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// RecoveredReason is the reason of the Normal Event recorded when a sync
// succeeds after a reported failure.
const RecoveredReason = "LoadBalancerModuleRecovered"

// RepeatEvery is how often a failure that keeps the same cause is reported
// again: the apiserver drops Events after an hour (its default --event-ttl),
// and a failure that lasts longer must stay visible.
const RepeatEvery = 50 * time.Minute

// ClusterObject is what failure Events are recorded on when the reconciler
// is given none: the kube-system Namespace, which every cluster has. A sync
// failure is never about one Service (the module's output covers all of
// them), so it is reported once for the cluster, not on each Service.
var ClusterObject = &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: metav1.NamespaceSystem}

// failureReporter turns the failures of a retried sync into one log line,
// one Event and one count per cause: a failure with the same reason and
// message as the one last reported is logged at V(2) only, until
// RepeatEvery has passed. A Service count of 10,000 and a retry every few
// seconds must not become 10,000 Events per retry. A success after a
// reported failure is logged and recorded once.
type failureReporter struct {
	recorder EventRecorder
	object   *corev1.ObjectReference
	clock    clock.PassiveClock
	log      klog.Logger

	mu       sync.Mutex
	last     string // reason and message of the failure last reported; "" when healthy
	lastTime time.Time
}

func (f *failureReporter) failed(err error, retry int) {
	reason := failureReason(err)
	cause := string(reason) + "\x00" + err.Error()
	now := f.clock.Now()
	f.mu.Lock()
	repeat := cause == f.last && now.Sub(f.lastTime) < RepeatEvery
	if !repeat {
		f.last, f.lastTime = cause, now
	}
	f.mu.Unlock()
	if repeat {
		f.log.V(2).Info("Load-balancer config sync still failing for the reason already reported", "reason", reason, "retry", retry)
		return
	}
	failuresReported.WithLabelValues(string(reason)).Inc()
	f.log.Error(err, "Load-balancer config sync failed; the cluster keeps the last good state, retrying with backoff", "reason", reason, "retry", retry)
	if f.recorder != nil {
		f.recorder.Eventf(f.object, corev1.EventTypeWarning, EventReason, "%s", err.Error())
	}
}

func (f *failureReporter) succeeded() {
	f.mu.Lock()
	was := f.last
	f.last = ""
	f.mu.Unlock()
	if was == "" {
		return
	}
	f.log.Info("Load-balancer config sync succeeded again after a failure")
	if f.recorder != nil {
		f.recorder.Eventf(f.object, corev1.EventTypeNormal, RecoveredReason, "The load-balancer module's output is applied again")
	}
}

// failureReason is the metric label of a failed sync.
func failureReason(err error) wasmhost.Reason {
	var me *wasmhost.Error
	if errors.As(err, &me) {
		return me.Reason
	}
	return ReasonApply
}
