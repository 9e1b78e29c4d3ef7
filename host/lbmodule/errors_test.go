package lbmodule

import (
	"errors"
	"fmt"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// TestFailureReason: the syncs_total result of each kind of failure, and
// the message of this package's own errors, which is the Event's and the
// log line's text.
func TestFailureReason(t *testing.T) {
	apply := &syncError{module: "metallb-crd", reason: reasonApply, msg: "applying IPAddressPool metallb-system/x: forbidden"}
	snapshot := &syncError{module: "empty", reason: reasonSnapshot, msg: "cannot get its input: informers not synced"}
	for _, tc := range []struct {
		name   string
		err    error
		reason wasmhost.Reason
		msg    string
	}{
		{"apply", apply, "apply", "load-balancer module metallb-crd applying IPAddressPool metallb-system/x: forbidden"},
		{"snapshot", snapshot, "snapshot", "load-balancer module empty cannot get its input: informers not synced"},
		{"wrapped", fmt.Errorf("sync: %w", snapshot), "snapshot", "sync: load-balancer module empty cannot get its input: informers not synced"},
		{"the runtime's", &wasmhost.Error{Module: "mine", Reason: wasmhost.ReasonTrap, Msg: "trapped: unreachable"}, "trap", "load-balancer module mine trapped: unreachable"},
		{"any other error", errors.New("connection refused"), "apply", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failureReason(tc.err); got != tc.reason {
				t.Errorf("failureReason = %q, want %q", got, tc.reason)
			}
			if got := tc.err.Error(); got != tc.msg {
				t.Errorf("message %q, want %q", got, tc.msg)
			}
		})
	}
}
