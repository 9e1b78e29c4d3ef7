package lbmodule

import (
	"context"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// MarkDirty asks for a sync. Calls within the debounce window, and calls
// while a sync runs, add up to one more sync.
//
// The window is the debounce, or the duration of the last sync if that was
// longer: at 10,000 Services a sync takes seconds of CPU, and back-to-back
// syncs during a burst would keep a core busy with the module and starve
// the rest of the process (the leader lease's renewals among it). So the
// module gets at most about half of one core, and a burst still ends in
// one sync of the final state.
func (r *Reconciler) MarkDirty() {
	r.queue.AddAfter(queueKey, max(r.cfg.Debounce, time.Duration(r.lastDuration.Load())))
}

// Run syncs once at start, then whenever marked dirty, until ctx is done.
func (r *Reconciler) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	r.queue.Add(queueKey)
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		err := r.Sync(ctx)
		switch {
		case err == nil:
			r.queue.Forget(key)
		case ctx.Err() != nil:
		default:
			// Sync has reported the failure (once per cause).
			r.queue.AddRateLimited(key)
		}
		r.queue.Done(key)
	}
}

// SetModule replaces the module (a new version of a file module) from the
// next sync on, and asks for that sync. The sync in flight, if any,
// finishes with the module it started with; the replaced one is closed by
// the next sync, the only user of the module.
func (r *Reconciler) SetModule(m *wasmhost.Module) {
	if old := r.next.Swap(m); old != nil {
		_ = old.Close(context.Background()) // replaced before it was used
	}
	r.queue.Add(queueKey)
}

// takeNextModule switches to the module SetModule gave, if any.
func (r *Reconciler) takeNextModule(ctx context.Context) {
	m := r.next.Swap(nil)
	if m == nil {
		return
	}
	old := r.cfg.Module
	r.cfg.Module = m
	r.log.Info("Load-balancer module replaced", "sha256", m.SHA256(), "previous", old.SHA256())
	_ = old.Close(ctx)
}

// LastError is the error of the last sync, nil after a success.
func (r *Reconciler) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}
