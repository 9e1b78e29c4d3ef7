package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

// Watch reloads the policy directory when its files change, until ctx
// ends; it returns nil then, or at once for the built-in policies. It
// watches the directory itself: a ConfigMap update swaps the "..data"
// symlink there, and plain files edited in place show up as writes. It
// re-reads the directory once at start (the CCM starts Watch when it takes
// the lead, and the files may have changed while it followed). Events are
// debounced by Options.ReloadDelay, and the directory is re-read every
// Options.ResyncPeriod in case an event was lost. Outcomes go to the log,
// the metrics and Options.OnReload.
func (e *Engine) Watch(ctx context.Context) error {
	return e.watch(ctx, nil)
}

// watch is Watch; ready, if not nil, is closed once changes are watched,
// so that tests need not guess when to change files.
func (e *Engine) watch(ctx context.Context, ready chan<- struct{}) error {
	if e.dir == "" {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching policy directory %s: %w", e.dir, err)
	}
	defer func() { _ = w.Close() }()
	if err := w.Add(e.dir); err != nil {
		return fmt.Errorf("watching policy directory %s: %w; policy changes need a restart of the CCM", e.dir, err)
	}
	logger := klog.FromContext(ctx)

	// The timer is stopped until an event arms it.
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	resync := time.NewTicker(e.opts.ResyncPeriod)
	defer resync.Stop()

	reload := func() {
		changed, err := e.Reload(ctx)
		if !changed {
			return
		}
		e.logReload(ctx, err)
		if e.opts.OnReload != nil {
			e.opts.OnReload(err)
		}
	}
	if ready != nil {
		close(ready)
	}
	// Watch runs on the leader only, so the files may have changed while
	// this replica followed: re-read at once rather than decide with stale
	// policies until the first event or resync. Changes from here on are
	// watched already.
	reload()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			logger.V(4).Info("Policy directory changed", "event", ev.String())
			debounce.Reset(e.opts.ReloadDelay)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			logger.Error(err, "Watching the policy directory", "dir", e.dir)
		case <-debounce.C:
			reload()
		case <-resync.C:
			reload()
		}
	}
}
