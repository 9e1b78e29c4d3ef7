package lbmodule

import (
	"context"
	"time"
)

// AwaitSync asks for a sync and waits until one that began after the call
// has written the module's objects, or has ended without (whether it
// failed or had nothing to write); it reports false when ctx ended first.
// What the caller changed in the module's input before the call
// (host/provider's staged addresses) is in that sync's snapshot: the
// caller waits until the module's output for it is applied, or could not
// be. It does not wait for the rest of that sync (pruning what is no
// longer wanted, node annotations): a new Service's pool is in by then,
// and in a burst the rest took a few hundred milliseconds that every
// waiting Service's address sat behind. The sync it asks for is spaced
// from the last by a quarter of the debounce (awaitedSpacing).
func (r *Reconciler) AwaitSync(ctx context.Context) bool {
	// Syncs are numbered as they begin: one numbered past the last begun
	// began after this line, so after the caller's change.
	want := r.begun.Load() + 1
	r.markDirty(time.Duration(r.lastStart.Load()) + r.cfg.Debounce/awaitedSpacing)
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

// syncReached records that sync number seq has written its objects or
// ended, and wakes AwaitSync's callers. A sync reaches both; the second
// call changes nothing but the wake-up.
func (r *Reconciler) syncReached(seq int64) {
	r.doneMu.Lock()
	defer r.doneMu.Unlock()
	r.doneSeq = max(r.doneSeq, seq)
	close(r.doneCh)
	r.doneCh = make(chan struct{})
}
