package lbmodule

import (
	"errors"
	"fmt"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// The reasons of a sync that failed around the module call rather than in
// it. A failing call is the runtime's *wasmhost.Error with the runtime's
// reasons (trap, deadline, memory, ...); these two are this package's, in
// the same wasmhost.Reason set that sdk/wasmhost leaves a host to extend,
// so that syncs_total's result label and the failure Event's cause are one
// list.
const (
	// reasonApply: reading, applying or pruning in Kubernetes failed, or
	// the output cannot be applied to this cluster (a kind it does not
	// serve, a wrong scope).
	reasonApply wasmhost.Reason = "apply"
	// reasonSnapshot: the module's input could not be built.
	reasonSnapshot wasmhost.Reason = "snapshot"
)

// syncError is a sync that failed around the module call: the Kubernetes
// reads and writes for the module's output (reasonApply), or its input
// (reasonSnapshot). Its message reads like the runtime's: "load-balancer
// module <name> <what failed and what to do>".
type syncError struct {
	module string
	reason wasmhost.Reason
	msg    string
}

func (e *syncError) Error() string { return "load-balancer module " + e.module + " " + e.msg }

// applyErr is a Kubernetes failure of the sync (reasonApply).
func (r *Reconciler) applyErr(format string, args ...any) error {
	return &syncError{module: r.cfg.Module.Name(), reason: reasonApply, msg: fmt.Sprintf(format, args...)}
}

// snapshotErr is a failure to get the module's input (reasonSnapshot).
func (r *Reconciler) snapshotErr(err error) error {
	return &syncError{module: r.cfg.Module.Name(), reason: reasonSnapshot, msg: "cannot get its input: " + err.Error()}
}

// failureReason is the metric label of a failed sync: this package's reason
// for a failure around the module call, the runtime's for a failing call,
// and reasonApply for any other error.
func failureReason(err error) wasmhost.Reason {
	var se *syncError
	if errors.As(err, &se) {
		return se.reason
	}
	var me *wasmhost.Error
	if errors.As(err, &me) {
		return me.Reason
	}
	return reasonApply
}
