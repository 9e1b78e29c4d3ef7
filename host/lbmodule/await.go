package lbmodule

import "context"

// AwaitSync waits until a sync that took its snapshot after the call has
// written the module's objects, or has ended without (whether it failed or
// had nothing to write); it reports false when ctx ended first. What the
// caller changed in the module's input before the call (host/provider's
// staged addresses) is in that sync's snapshot: the caller waits until
// the module's output for it is applied, or could not be. It does not
// wait for the rest of that sync (pruning what is no longer wanted, node
// annotations): a new Service's pool is in by then, and in a burst the
// rest took a few hundred milliseconds that every waiting Service's
// address sat behind.
//
// A sync still reading (before its snapshot) is the one the caller
// waits for, and no other is asked for: in a burst, the Services staged
// during a sync's reads (a second on a loaded API server) waited for the
// whole next sync before. Otherwise it asks for a sync, spaced from the
// last by a quarter of the debounce (awaitedSpacing).
func (r *Reconciler) AwaitSync(ctx context.Context) bool {
	r.doneMu.Lock()
	// Syncs are numbered as they take their snapshot: the next number is
	// a snapshot taken after this line, so after the caller's change.
	want, reading := r.snapped+1, r.reading
	r.doneMu.Unlock()
	if !reading {
		r.ask(true)
	}
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

// beginSync records that a sync began: it reads before its snapshot.
func (r *Reconciler) beginSync() {
	r.doneMu.Lock()
	defer r.doneMu.Unlock()
	r.reading = true
}

// snapshotTaken numbers the sync about to take its snapshot (or ending
// before it took one), and returns the number.
func (r *Reconciler) snapshotTaken() int64 {
	r.doneMu.Lock()
	defer r.doneMu.Unlock()
	r.reading = false
	r.snapped++
	return r.snapped
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
