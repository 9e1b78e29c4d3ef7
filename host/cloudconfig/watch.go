// Package cloudconfig follows the cloud-config file after start, so that a
// rotated API key is used without restarting the CCM.
//
// The file is normally a Secret volume: the kubelet updates it by writing a
// new timestamped directory and swapping the "..data" symlink next to it,
// so the file's own inode never changes and a watch on the file alone sees
// nothing. The directory is watched instead, and the content (not the
// event) decides whether anything changed; a periodic re-read covers a lost
// event.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package cloudconfig

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

// Options tune Watch; zero values take the defaults.
type Options struct {
	// Debounce gathers the several events of one update (default 200ms).
	Debounce time.Duration
	// Resync re-reads the file this often even without an event (default
	// one minute).
	Resync time.Duration
	// Ready, if set, is closed once the directory is watched.
	Ready chan<- struct{}
}

// Watch calls onChange with the file's content each time it differs from
// the last content seen (the first read is the baseline: no call), until
// ctx ends. An unreadable file is logged and skipped; the last good content
// stays the baseline.
func Watch(ctx context.Context, path string, o Options, onChange func([]byte)) error {
	if o.Debounce <= 0 {
		o.Debounce = 200 * time.Millisecond
	}
	if o.Resync <= 0 {
		o.Resync = time.Minute
	}
	logger := klog.FromContext(ctx)
	last, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("watching the cloud-config file: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the cloud-config file %s: %w", path, err)
	}
	defer func() { _ = w.Close() }()
	if err := w.Add(filepath.Dir(path)); err != nil {
		return fmt.Errorf("watching the cloud-config file %s: %w; a rotated API key needs a restart of the CCM", path, err)
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	resync := time.NewTicker(o.Resync)
	defer resync.Stop()
	check := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			logger.Error(err, "Cannot re-read the cloud-config file; keeping the running configuration", "path", path)
			return
		}
		if bytes.Equal(b, last) {
			return
		}
		last = b
		onChange(b)
	}
	if o.Ready != nil {
		close(o.Ready)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			debounce.Reset(o.Debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			logger.Error(err, "Watching the cloud-config file", "path", path)
		case <-debounce.C:
			check()
		case <-resync.C:
			check()
		}
	}
}
