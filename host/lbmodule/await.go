package lbmodule

import (
	"context"
)

// AwaitSync asks for a sync and waits until one that began after the call
// has ended, whether it succeeded or not; it reports false when ctx ended
// first. What the caller changed in the module's input before the call
// (host/provider's staged addresses) is in that sync's snapshot: the
// caller waits until the module's output for it is applied, or could not
// be.
func (r *Reconciler) AwaitSync(ctx context.Context) bool {
	// Syncs are numbered as they begin: one numbered past the last begun
	// began after this line, so after the caller's change.
	want := r.begun.Load() + 1
	r.MarkDirty()
	for {
		r.doneMu.Lock()
		done, ch := r.doneSeq, r.doneCh
		r.doneMu.Unlock()
		if done >= want {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// syncEnded records that sync number seq has ended, and wakes AwaitSync's
// callers.
func (r *Reconciler) syncEnded(seq int64) {
	r.doneMu.Lock()
	defer r.doneMu.Unlock()
	r.doneSeq = seq
	close(r.doneCh)
	r.doneCh = make(chan struct{})
}
