package lbmodule

import (
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/clusterevent"
)

// recoveredReason is the reason of the Normal Event recorded when a sync
// succeeds after a reported failure.
const recoveredReason = "LoadBalancerModuleRecovered"

// failureReporter turns the failures of a retried sync into one log line,
// one Event (clusterevent: on the kube-system Namespace) and one count per
// cause: a sync failure is never about one Service (the module's output
// covers all of them), and 10,000 Services and a retry every few seconds
// must not become 10,000 Warnings per retry. The cause is the reason and
// the message; a repeat is logged at V(2) only.
type failureReporter struct {
	events *clusterevent.Reporter
	log    klog.Logger
}

func newFailureReporter(cfg ReconcilerConfig, log klog.Logger) *failureReporter {
	r := &clusterevent.Reporter{Object: cfg.EventObject, Reason: eventReason, Clock: cfg.Clock,
		RecoveredReason: recoveredReason, RecoveredMessage: "The load-balancer module's output is applied again"}
	if cfg.Recorder != nil {
		r.Recorder = cfg.Recorder
	}
	return &failureReporter{events: r, log: log}
}

func (f *failureReporter) failed(err error, retry int) {
	reason := failureReason(err)
	if !f.events.Failed(string(reason)+"\x00"+err.Error(), err.Error()) {
		f.log.V(2).Info("Load-balancer config sync still failing for the reason already reported", "reason", reason, "retry", retry)
		return
	}
	f.log.Error(err, "Load-balancer config sync failed; the cluster keeps the last good state, retrying with backoff", "reason", reason, "retry", retry)
}

func (f *failureReporter) succeeded() {
	if f.events.Succeeded() {
		f.log.Info("Load-balancer config sync succeeded again after a failure")
	}
}
