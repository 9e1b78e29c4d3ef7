// Package ocimodule delivers load-balancer modules by digest: a .wasm
// packaged as an OCI artifact (Package), pulled from a registry by a
// reference pinned to a manifest digest, verified, and cached on disk
// (Fetcher). A module is run only if every byte matches the digest the
// configuration names; a tag is never resolved, so what runs cannot change
// under the operator.
//
// The artifact follows the layout of the CNCF TAG Runtime "Wasm OCI
// artifact" proposal: an OCI image manifest with the config media type
// configMediaType and exactly one layer of media type wasmMediaType, the
// module itself, uncompressed.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package ocimodule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Scheme is the loadbalancer URL scheme of a module in a registry:
	// wasm+oci://registry.example/team/module@sha256:<hex>.
	Scheme = "wasm+oci://"
	// configMediaType is the artifact's config media type.
	configMediaType types.MediaType = "application/vnd.wasm.config.v0+json"
	// wasmMediaType is the media type of the one layer, the module.
	wasmMediaType types.MediaType = "application/wasm"
)

// wasmMagic starts every WebAssembly binary module.
var wasmMagic = []byte("\x00asm")

// Package makes the artifact of a module. created is the config's creation
// time; a fixed one (the Unix epoch) makes the digest depend only on wasm.
func Package(wasm []byte, created time.Time) (v1.Image, error) {
	if !bytes.HasPrefix(wasm, wasmMagic) {
		return nil, fmt.Errorf("is not a WebAssembly module (no \\0asm header); build it with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared")
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, configMediaType)
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(wasm, wasmMediaType)})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "wasip1", "wasm"
	cf.Created = v1.Time{Time: created.UTC()}
	cf.History = nil
	return mutate.ConfigFile(img, cf)
}

// Fetcher pulls modules by digest and keeps them in a cache directory.
type Fetcher struct {
	// CacheDir holds verified modules as sha256-<hex>.wasm, named by the
	// manifest digest; empty keeps nothing on disk (every start pulls).
	CacheDir string
	// Keychain gives registry credentials; nil means authn.DefaultKeychain
	// ($DOCKER_CONFIG/config.json: the chart mounts a pull Secret there).
	Keychain authn.Keychain
	// Transport is the HTTP transport (tests; nil = remote.DefaultTransport).
	Transport http.RoundTripper
	// Insecure allows plain HTTP registries (tests, a registry on loopback).
	Insecure bool
}

// Fetch returns the module the artifact at ref (registry/repo@sha256:hex)
// holds, after checking that the manifest has ref's digest, that it is a
// Wasm artifact (configMediaType, one wasmMediaType layer) and that the
// layer has the digest the manifest names. A cached copy is used only if
// its manifest and module still hash to the digests they are named by.
// It returns the path of the module in CacheDir ("" without one) too.
func (f *Fetcher) Fetch(ctx context.Context, ref string) (wasm []byte, path string, err error) {
	var opts []name.Option
	if f.Insecure {
		opts = append(opts, name.Insecure)
	}
	d, err := name.NewDigest(ref, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("module %s: %w; pin it by digest: <registry>/<repository>@sha256:<64 hex digits>", ref, err)
	}
	if wasm, path, ok := f.cached(d.DigestStr()); ok {
		return wasm, path, nil
	}
	kc := f.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if f.Transport != nil {
		ropts = append(ropts, remote.WithTransport(f.Transport))
	}
	// remote.Get checks that the manifest it receives hashes to d's digest.
	desc, err := remote.Get(d, ropts...)
	if err != nil {
		return nil, "", fmt.Errorf("module %s: pulling from %s: %w", ref, d.RegistryStr(), err)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, "", fmt.Errorf("module %s: %w; make module-image packages a .wasm as an OCI artifact", ref, err)
	}
	wasm, err = moduleOf(img)
	if err != nil {
		return nil, "", fmt.Errorf("module %s: %w", ref, err)
	}
	path, err = f.store(d.DigestStr(), desc.Manifest, wasm)
	if err != nil {
		return nil, "", fmt.Errorf("module %s: caching it: %w", ref, err)
	}
	return wasm, path, nil
}

// moduleOf checks the artifact's shape and reads its one layer (verified
// against the layer digest while read).
func moduleOf(img v1.Image) ([]byte, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if m.Config.MediaType != configMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != wasmMediaType {
		var layers []string
		for _, l := range m.Layers {
			layers = append(layers, string(l.MediaType))
		}
		return nil, fmt.Errorf("is not a Wasm module artifact (config %s, layers %v; want config %s and one %s layer): make module-image packages a .wasm as one", m.Config.MediaType, layers, configMediaType, wasmMediaType)
	}
	layer, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		return nil, err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }() // read only: nothing to lose
	wasm, err := io.ReadAll(io.LimitReader(rc, maxModuleSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading the module layer: %w", err)
	}
	if len(wasm) > maxModuleSize {
		return nil, fmt.Errorf("the module layer is larger than %d MiB", maxModuleSize>>20)
	}
	if h := sha256.Sum256(wasm); "sha256:"+hex.EncodeToString(h[:]) != m.Layers[0].Digest.String() {
		return nil, fmt.Errorf("the module layer does not match its digest %s", m.Layers[0].Digest)
	}
	if !bytes.HasPrefix(wasm, wasmMagic) {
		return nil, fmt.Errorf("the %s layer is not a WebAssembly module (no \\0asm header)", wasmMediaType)
	}
	return wasm, nil
}

// maxModuleSize bounds what a pull may read into memory.
const maxModuleSize = 64 << 20

func (f *Fetcher) cachePaths(digest string) (manifest, module string) {
	base := filepath.Join(f.CacheDir, strings.ReplaceAll(digest, ":", "-"))
	return base + ".manifest.json", base + ".wasm"
}

// cached returns a cached module whose manifest still hashes to digest and
// whose bytes still hash to the layer digest the manifest names.
func (f *Fetcher) cached(digest string) ([]byte, string, bool) {
	if f.CacheDir == "" {
		return nil, "", false
	}
	mp, wp := f.cachePaths(digest)
	mb, err := os.ReadFile(mp)
	if err != nil {
		return nil, "", false
	}
	if h := sha256.Sum256(mb); "sha256:"+hex.EncodeToString(h[:]) != digest {
		return nil, "", false
	}
	m, err := v1.ParseManifest(bytes.NewReader(mb))
	if err != nil || len(m.Layers) != 1 {
		return nil, "", false
	}
	wasm, err := os.ReadFile(wp)
	if err != nil {
		return nil, "", false
	}
	if h := sha256.Sum256(wasm); "sha256:"+hex.EncodeToString(h[:]) != m.Layers[0].Digest.String() {
		return nil, "", false
	}
	return wasm, wp, true
}

func (f *Fetcher) store(digest string, manifest, wasm []byte) (string, error) {
	if f.CacheDir == "" {
		return "", nil
	}
	if err := os.MkdirAll(f.CacheDir, 0o755); err != nil {
		return "", err
	}
	mp, wp := f.cachePaths(digest)
	for _, w := range []struct {
		path string
		b    []byte
	}{{wp, wasm}, {mp, manifest}} { // the manifest last: it marks the entry complete
		tmp := w.path + ".tmp"
		if err := os.WriteFile(tmp, w.b, 0o644); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, w.path); err != nil {
			return "", err
		}
	}
	return wp, nil
}
