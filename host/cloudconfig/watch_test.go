package cloudconfig

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeLikeKubelet updates a Secret volume the way the kubelet does: a new
// directory, then an atomic swap of the ..data symlink.
func writeLikeKubelet(t *testing.T, dir, name, content string, gen int) {
	t.Helper()
	ts := filepath.Join(dir, "..2026_"+string(rune('a'+gen)))
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if gen == 0 {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWatchSecretVolume(t *testing.T) {
	dir := t.TempDir()
	writeLikeKubelet(t, dir, "cloud-sa.json", `{"apiKey":"old"}`, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 10)
	ready := make(chan struct{})
	go func() {
		_ = Watch(ctx, filepath.Join(dir, "cloud-sa.json"), Options{Debounce: 20 * time.Millisecond, Resync: time.Hour, Ready: ready}, func(b []byte) { got <- string(b) })
	}()
	<-ready
	writeLikeKubelet(t, dir, "cloud-sa.json", `{"apiKey":"new"}`, 1)
	select {
	case s := <-got:
		if s != `{"apiKey":"new"}` {
			t.Fatalf("got %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the symlink swap was not noticed")
	}
	// Unchanged content (a resync, or an event of another file) calls nothing.
	if err := os.WriteFile(filepath.Join(dir, "unrelated"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		t.Fatalf("called again with unchanged content %q", s)
	case <-time.After(300 * time.Millisecond):
	}
}
