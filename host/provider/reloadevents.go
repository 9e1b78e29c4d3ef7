package provider

import (
	"k8s.io/client-go/tools/record"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/clusterevent"
)

// Reasons of the Events of a mounted file that fails to reload: the
// load-balancer module file (moduleWatch) and the policy directory
// (policy.Engine's Watch). A failed reload keeps the last good version, so
// nothing in the cluster changes and nothing fails: without an Event, only
// the log, a gauge and /readyz would say the edit was not taken, and
// `kubectl get events` is where users look after an edit. A reload
// concerns the whole cluster, so the Event is clusterevent's: once per
// cause on the kube-system Namespace, not at every resync.
const (
	reasonModuleReloadFailed    = "LoadBalancerModuleReloadFailed"
	reasonModuleReloadRecovered = "LoadBalancerModuleReloadRecovered"
	reasonPolicyReloadFailed    = "PolicyReloadFailed"
	reasonPolicyReloadRecovered = "PolicyReloadRecovered"
)

// moduleReloadEvents reports the reloads of the module file at path.
func moduleReloadEvents(recorder record.EventRecorder, path string) *clusterevent.Reporter {
	return &clusterevent.Reporter{Recorder: recorder, Reason: reasonModuleReloadFailed,
		RecoveredReason:  reasonModuleReloadRecovered,
		RecoveredMessage: "The load-balancer module file " + path + " loads again; the module in use is the file's"}
}

// policyReloadEvents reports the reloads of the policy directory dir.
func policyReloadEvents(recorder record.EventRecorder, dir string) *clusterevent.Reporter {
	return &clusterevent.Reporter{Recorder: recorder, Reason: reasonPolicyReloadFailed,
		RecoveredReason:  reasonPolicyReloadRecovered,
		RecoveredMessage: "The policies in " + dir + " load again; the policies in use are the files'"}
}
