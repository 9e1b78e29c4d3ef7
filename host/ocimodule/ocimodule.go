// Package ocimodule delivers load-balancer modules by digest: a .wasm
// packaged as an OCI artifact (Package), pulled from a registry by a
// reference pinned to a manifest digest, verified, and cached on disk
// (Fetcher). A module is run only if every byte matches the digest the
// configuration names; a tag is never resolved, so what runs cannot change
// under the operator.
//
// The artifact follows the layout of the CNCF TAG Runtime "Wasm OCI
// artifact" proposal: an OCI image manifest with the config media type
// ConfigMediaType and exactly one layer of media type WasmMediaType, the
// module itself, uncompressed.
package ocimodule

import (
	"bytes"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Scheme is the loadbalancer URL scheme of a module in a registry:
	// wasm+oci://registry.example/team/module@sha256:<hex>.
	Scheme = "wasm+oci://"
	// ConfigMediaType is the artifact's config media type.
	ConfigMediaType types.MediaType = "application/vnd.wasm.config.v0+json"
	// WasmMediaType is the media type of the one layer, the module.
	WasmMediaType types.MediaType = "application/wasm"
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
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(wasm, WasmMediaType)})
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
