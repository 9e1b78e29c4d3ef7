package lbmodule

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// ImageCacheDir is where the release image carries wazero's compiled code
// of the built-in modules for its own platform (hack/image compiles them
// when it builds the image on that platform). The chart's module cache is
// an emptyDir mounted over nothing there, so a new pod starts with it
// instead of compiling for seconds.
const ImageCacheDir = "/usr/lib/cloud-provider-equinix-metal/module-cache"

// SeedCache links into the module cache directory every compiled entry of
// from that the cache lacks. wazero keys an entry by the module's hash, its
// own version and the CPU's features, and recompiles (overwriting the link)
// when nothing matches: an entry made on another CPU, by another wazero,
// or for another module memory limit is ignored, never wrong. A missing
// from is no error: only release images carry it.
func SeedCache(from, to string) (linked int, err error) {
	subdirs, err := os.ReadDir(from)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, d := range subdirs {
		if !d.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(from, d.Name()))
		if err != nil {
			return linked, err
		}
		dst := filepath.Join(to, d.Name())
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return linked, err
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			err := os.Symlink(filepath.Join(from, d.Name(), e.Name()), filepath.Join(dst, e.Name()))
			switch {
			case err == nil:
				linked++
			case !errors.Is(err, fs.ErrExist): // an entry already cached stays
				return linked, err
			}
		}
	}
	return linked, nil
}
