package ocimodule_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/ocimodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/modules"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/ociregistry"
)

func emptyModule(t *testing.T) []byte {
	t.Helper()
	wasm, err := modules.Builtin(modules.Empty)
	if err != nil {
		t.Fatalf("%v (run make modules)", err)
	}
	return wasm
}

// TestFetch pushes a module to an in-process registry (go-containerregistry's
// pkg/registry) and pulls it by digest, then checks every refusal.
func TestFetch(t *testing.T) {
	host, stopRegistry := ociregistry.Start(t)
	wasm := emptyModule(t)
	img, err := ocimodule.Package(wasm, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ref := ociregistry.Push(t, host, "team/empty", img)
	notWasm, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	notWasmRef := ociregistry.Push(t, host, "team/app", notWasm)
	cache := t.TempDir()
	f := &ocimodule.Fetcher{CacheDir: cache}
	ctx := context.Background()

	got, path, err := f.Fetch(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wasm) {
		t.Fatal("pulled module differs from the pushed one")
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, wasm) {
		t.Fatalf("cache %s: %v", path, err)
	}

	refusals := []struct {
		name, ref string
		want      []string
	}{
		{"a tag, not a digest", host + "/team/empty:v1", []string{"pin it by digest"}},
		{"a wrong digest", host + "/team/empty@sha256:" + strings.Repeat("0", 64), []string{"pulling from " + host, "MANIFEST_UNKNOWN"}},
		{"not a Wasm artifact", notWasmRef, []string{"is not a Wasm module artifact", "make module-image"}},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			_, _, err := (&ocimodule.Fetcher{CacheDir: t.TempDir()}).Fetch(ctx, r.ref)
			for _, w := range r.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Fetch(%s) = %v, want an error with %q", r.ref, err, w)
				}
			}
		})
	}

	// The registry goes away: the verified cache still serves the module;
	// a module never pulled fails with the registry named.
	stopRegistry()
	if got, _, err := f.Fetch(ctx, ref); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("from the cache: %v", err)
	}
	t.Run("an unreachable registry", func(t *testing.T) {
		_, _, err := (&ocimodule.Fetcher{CacheDir: t.TempDir()}).Fetch(ctx, ref)
		if err == nil || !strings.Contains(err.Error(), "pulling from "+host) {
			t.Errorf("Fetch with the registry down = %v", err)
		}
	})
	// A cached module that no longer matches its digest is not used.
	if err := os.WriteFile(path, append([]byte("\x00asm"), make([]byte, 8)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Fetch(ctx, ref); err == nil || !strings.Contains(err.Error(), "pulling from") {
		t.Errorf("a tampered cache was used: %v", err)
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".tmp" {
			t.Errorf("left %s in the cache", e.Name())
		}
	}
}

func TestPackageRefusesNonWasm(t *testing.T) {
	if _, err := ocimodule.Package([]byte("#!/bin/sh\n"), time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), "not a WebAssembly module") {
		t.Errorf("Package(shell script) = %v", err)
	}
}
