package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/clusterevent"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// moduleResync is how often a file module is re-read even without a
// change event (a missed event, a volume that does not notify).
var moduleResync = time.Minute

// moduleWatch takes a changed file module (wasm://path, mounted from a
// ConfigMap or volume) into use without a restart. A file that fails to
// load (unreadable, not the pinned sha256, not a valid module) never
// replaces the module in use: the previous one keeps working, the failure
// is logged once, counted (equinix_metal_lbmodule_reload_failing), recorded
// once as a LoadBalancerModuleReloadFailed Event (reloadevents.go) and
// named by readiness until a good module is back. Built-in modules are in
// the binary and wasm+oci:// modules are pinned by digest: neither changes
// while the CCM runs, so neither is watched.
type moduleWatch struct {
	lb   config.LoadBalancer
	opts wasmhost.Options
	set  func(*wasmhost.Module) // the reconciler's SetModule, once it runs
	// events records the failures and the recovery (set with set).
	events *clusterevent.Reporter

	mu        sync.Mutex
	digest    string // sha256 of the module in use
	failed    string // sha256 of the file that last failed to load ("" unreadable)
	failedMsg string // and why
	lastErr   error
}

// watchable says whether the module is a file that may change while the
// CCM runs.
func watchable(lb config.LoadBalancer) bool { return lb.Kind == config.LBWasm && lb.OCIRef == "" }

// err is the failure of the latest load of a changed file, nil when the
// module in use is the file's.
func (w *moduleWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// check loads the file if it differs from the module in use.
func (w *moduleWatch) check(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := os.ReadFile(w.lb.Path)
	if err != nil {
		w.fail(fmt.Errorf("load-balancer module %s cannot be read (%v); mount the module file at that path", w.lb.Path, err), "")
		return
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	switch {
	case digest == w.digest:
		if w.lastErr != nil {
			klog.InfoS("The load-balancer module file is the module in use again", "path", w.lb.Path, "sha256", digest)
			w.lastErr, w.failed, w.failedMsg = nil, "", ""
			lbmodule.RecordReload(nil)
			w.recovered()
		}
		return
	case digest == w.failed && w.lastErr != nil:
		return // already reported
	}
	mod, err := lbmodule.Load(ctx, w.lb, w.opts)
	if err != nil {
		w.fail(err, digest)
		return
	}
	klog.InfoS("Load-balancer module file changed; using the new module", "path", w.lb.Path, "sha256", mod.SHA256(), "previous", w.digest)
	w.digest, w.failed, w.failedMsg, w.lastErr = mod.SHA256(), "", "", nil
	lbmodule.RecordReload(nil)
	w.recovered()
	w.set(mod)
}

// fail records a file that cannot replace the module in use; called with
// w.mu held.
func (w *moduleWatch) fail(err error, digest string) {
	if w.lastErr != nil && w.failed == digest && w.failedMsg == err.Error() {
		return // reported already
	}
	w.failedMsg = err.Error()
	w.lastErr = fmt.Errorf("the changed module file failed to load, still using the previous module (sha256 %s): %w", short(w.digest), err)
	w.failed = digest
	lbmodule.RecordReload(w.lastErr)
	klog.ErrorS(w.lastErr, "Load-balancer module reload failed; put a valid module back at the path (no restart needed)", "path", w.lb.Path)
	if w.events != nil {
		file := w.lb.Path
		if digest != "" {
			file += " (sha256 " + short(digest) + ")"
		}
		w.events.Failed(digest+"\x00"+err.Error(), fmt.Sprintf("The load-balancer module file %s did not load, so the last good module (sha256 %s) stays in use: %v; put a valid module at that path (no restart needed)",
			file, short(w.digest), err))
	}
}

// recovered records the end of a reported failure: the file is the module
// in use again, or a new valid one.
func (w *moduleWatch) recovered() {
	if w.events != nil {
		w.events.Succeeded()
	}
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// run checks at once (a new leader may have started with an older file),
// then on every change in the file's directory (a ConfigMap update swaps a
// symlink there, so the directory is watched, not the file) after a short
// debounce, and every moduleResync, until ctx ends.
func (w *moduleWatch) run(ctx context.Context) {
	w.check(ctx)
	fw, err := fsnotify.NewWatcher()
	if err == nil {
		defer func() { _ = fw.Close() }()
		err = fw.Add(filepath.Dir(w.lb.Path))
	}
	var events <-chan fsnotify.Event
	if err != nil {
		klog.ErrorS(err, "Watching the load-balancer module file; its changes are read every resync only", "path", w.lb.Path, "resync", moduleResync)
	} else {
		events = fw.Events
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	resync := time.NewTicker(moduleResync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			debounce.Reset(500 * time.Millisecond)
		case <-debounce.C:
			w.check(ctx)
		case <-resync.C:
			w.check(ctx)
		}
	}
}
