package lbmodule

import (
	"context"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/watchcache"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// MarkDirty asks for a sync. Calls before the next sync may start, and
// calls while a sync runs, add up to one more sync.
//
// The next sync starts a debounce after the last one ended, and no sooner
// after it than that one was busy building its input and calling the
// module (phaseClock.busy): at 10,000 Services that takes seconds of CPU,
// and back-to-back syncs during a burst would keep a core busy and starve
// the rest of the process (the leader lease's renewals among it). So the
// module gets at most about half of one core, and a burst still ends in
// one sync of the final state. The debounce counts from the end, not the
// start: a sync waits a second or more for kube-apiserver under a burst's
// load, and counted from its start, the Service updates of a burst (each
// Service's status and annotations, MetalLB's among them) kept syncs
// going back to back, each listing every kind it writes on a loaded API
// server. A sync a new Service waits for (AwaitSync) comes sooner. A
// change after a quiet spell waits only gatherDelay: each new Service's
// pool (and with it MetalLB's allocation and the first packet) waited a
// whole debounce behind its address before.
//
// A change while a sync runs is held until it ends, and then spaced from
// that end: asked for at once, the queue's timer fired during the sync,
// the workqueue marked the key dirty, and the next sync began the moment
// this one ended, whatever the debounce and the busy time said (at 10,000
// Services, multi-second syncs back to back while Services filled).
func (r *Reconciler) MarkDirty() {
	r.ask(false)
}

// awaitedSpacing is the debounce of a sync someone waits for (AwaitSync: a
// new Service's address waits for its pool), as a share of the debounce,
// counted from the last sync's start. In a burst of new Services, those
// staged while a sync ran waited for the next one a whole debounce after
// it: the burst's last pools came a second behind its first. The CPU
// bound (the last sync's busy time) still holds, and syncs no one waits
// for (node annotations, endpoints, the resync) keep the whole debounce
// after the last sync's end.
const awaitedSpacing = 4

// ask asks for a sync, one someone waits for (AwaitSync) or not; while a
// sync runs the request is held, and made when it ends (endRun).
func (r *Reconciler) ask(awaited bool) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	switch {
	case r.running && awaited:
		r.heldAwaited = true
	case r.running:
		r.heldPlain = true
	default:
		r.schedule(awaited)
	}
}

// schedule queues a sync no sooner than the debounce after the last sync
// ended (a quarter of it after the last began, for one someone waits
// for), the last sync's busy time after it ended, and gatherDelay from
// now.
func (r *Reconciler) schedule(awaited bool) {
	notBefore := time.Duration(r.lastEnd.Load()) + r.cfg.Debounce
	if awaited {
		notBefore = time.Duration(r.lastStart.Load()) + r.cfg.Debounce/awaitedSpacing
	}
	next := max(notBefore, time.Duration(r.lastEnd.Load())+time.Duration(r.lastBusy.Load()))
	r.queue.AddAfter(queueKey, max(next-time.Duration(r.cfg.Clock.Now().UnixNano()), gatherDelay))
}

// startRun and endRun bracket a sync of the loop: the requests made
// meanwhile are held (ask) and scheduled once it has ended, from its end.
func (r *Reconciler) startRun() {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	r.running = true
}

func (r *Reconciler) endRun() {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	r.running = false
	if r.heldAwaited {
		r.schedule(true)
	}
	if r.heldPlain {
		r.schedule(false)
	}
	r.heldAwaited, r.heldPlain = false, false
}

// gatherDelay gathers the events of one moment (the Service patch, its
// status, the node annotations of the same change) into one sync.
const gatherDelay = 50 * time.Millisecond

// Run syncs once at start, then whenever marked dirty, until ctx is done.
// Its syncs read from watches (host/watchcache) what they read again and
// again, once each watch is whole.
func (r *Reconciler) Run(ctx context.Context) {
	// The sync reads one label of what it lists: whether the CCM owns it.
	// An owned object deleted by someone else is put back by the sync its
	// delete asks for: syncs run on changes, and a deleted BGPAdvertisement
	// changes nothing else the sync reads, while MetalLB stops announcing
	// what it advertised. (The sync's own prunes ask for one more sync,
	// which finds nothing to do.)
	r.watch = watchcache.New(ctx, r.cfg.Dynamic, r.cfg.Metadata, r.log, r.MarkDirty, sdk.OwnedLabel)
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
		r.startRun()
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
		r.endRun()
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
