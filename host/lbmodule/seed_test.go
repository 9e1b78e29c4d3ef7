package lbmodule

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/modules"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// TestSeedCache compiles the MetalLB built-in into an "image" cache, seeds
// an empty module cache from it, and checks that loading from the seeded
// cache compiles nothing (it writes no new entry); a second seed links
// nothing new, and a missing image cache is no error.
func TestSeedCache(t *testing.T) {
	wasm, err := modules.Builtin(modules.MetalLBCRD)
	if err != nil {
		t.Fatal(err)
	}
	image, cache := t.TempDir(), t.TempDir()
	m, err := wasmhost.LoadBytes(context.Background(), modules.MetalLBCRD, wasm, sdk.Options{}, wasmhost.Options{CacheDir: image})
	if err != nil {
		t.Fatal(err)
	}
	m.Close(context.Background())
	want := entries(t, image)
	if len(want) == 0 {
		t.Fatal("compiling wrote no cache entry")
	}

	n, err := SeedCache(image, cache)
	if err != nil || n != len(want) {
		t.Fatalf("SeedCache = %d, %v; want %d entries linked", n, err, len(want))
	}
	m, err = wasmhost.LoadBytes(context.Background(), modules.MetalLBCRD, wasm, sdk.Options{}, wasmhost.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	m.Close(context.Background())
	got := entries(t, cache)
	for name := range got {
		if fi, err := os.Lstat(filepath.Join(cache, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is not the seeded link (%v): the load compiled instead of reading the seed", name, err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("cache entries after loading from the seed: %d, want the %d seeded", len(got), len(want))
	}
	if n, err := SeedCache(image, cache); err != nil || n != 0 {
		t.Errorf("second SeedCache = %d, %v; want nothing new", n, err)
	}
	if n, err := SeedCache(filepath.Join(image, "missing"), cache); err != nil || n != 0 {
		t.Errorf("SeedCache from a missing directory = %d, %v; want 0, nil", n, err)
	}
}

// entries are the cache's files, by path relative to dir.
func entries(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	subs, _ := os.ReadDir(dir)
	for _, s := range subs {
		files, _ := os.ReadDir(filepath.Join(dir, s.Name()))
		for _, f := range files {
			out[filepath.Join(s.Name(), f.Name())] = true
		}
	}
	return out
}
