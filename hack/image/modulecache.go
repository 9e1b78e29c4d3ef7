package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/modules"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// NativePlatform is the only platform whose module cache can be made here:
// wazero compiles for the machine it runs on.
var NativePlatform = runtime.GOOS + "/" + runtime.GOARCH

// CompileModules writes wazero's compilation cache of every built-in module
// into dir, compiled as the CCM compiles them with the chart's default
// module memory limit (the limit is part of the code wazero compiles, so
// another limit misses the cache and compiles at start, as without one).
func CompileModules(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for _, name := range modules.Names {
		wasm, err := modules.Builtin(name)
		if err != nil {
			return err
		}
		m, err := wasmhost.LoadBytes(context.Background(), name, wasm, sdk.Options{}, wasmhost.Options{CacheDir: dir})
		if err != nil {
			return fmt.Errorf("compiling %s: %w", name, err)
		}
		if err := m.Close(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// moduleCacheFiles are the layer entries of a module cache directory at
// lbmodule.ImageCacheDir, with their parent directories.
func moduleCacheFiles(dir string) ([]file, error) {
	root := strings.TrimPrefix(lbmodule.ImageCacheDir, "/")
	var files []file
	for p := root; p != "."; p = filepath.Dir(p) {
		files = append(files, file{name: p + "/", mode: 0o755, dir: true})
	}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(filepath.Join(root, rel))
		if d.IsDir() {
			files = append(files, file{name: name + "/", mode: 0o755, dir: true})
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, file{name: name, mode: 0o444, data: b})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, err
}
