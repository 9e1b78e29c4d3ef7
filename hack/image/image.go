package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image facts shared by the builder and its test.
const (
	// BinaryPath is where the CCM lives in the image: upstream's image has it
	// at /cloud-provider-equinix-metal with working directory /, so
	// upstream's chart (command ./cloud-provider-equinix-metal) works too.
	BinaryPath = "/cloud-provider-equinix-metal"
	// User is distroless' "nonroot", numeric because the image has no
	// /etc/passwd (and runAsNonRoot needs a number to check).
	User = "65532:65532"
)

// Meta is what the labels and config say about the build.
type Meta struct {
	Version  string
	Revision string
	Source   string
	Created  time.Time // the commit time: the same for every build of a commit
}

// Labels are the OCI annotations the config carries (and the index too).
func (m Meta) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "cloud-provider-equinix-metal",
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.source":   m.Source,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  m.Created.UTC().Format(time.RFC3339),
	}
}

// Binary is one platform's static CCM binary, and the compiled built-in
// modules for that platform when they could be made (ModuleCache, a
// directory of CompileModules; empty for another platform than the
// builder's).
type Binary struct {
	Platform    v1.Platform
	Path        string
	ModuleCache string
}

// ParseBinary reads "os/arch=path".
func ParseBinary(s string) (Binary, error) {
	plat, path, ok := strings.Cut(s, "=")
	goos, arch, ok2 := strings.Cut(plat, "/")
	if !ok || !ok2 || goos == "" || arch == "" || path == "" {
		return Binary{}, fmt.Errorf("--binary %q: want os/arch=path, for example linux/amd64=bin/linux/amd64/cloud-provider-equinix-metal", s)
	}
	return Binary{Platform: v1.Platform{OS: goos, Architecture: arch}, Path: path}, nil
}

// BuildIndex assembles one image per binary and an index over them. Nothing
// is pulled: the image has no base, only the binary and an empty /tmp.
// Every timestamp is m.Created and entries are written in sorted order, so
// the same binaries and Meta always give the same digests.
func BuildIndex(bins []Binary, m Meta) (v1.ImageIndex, error) {
	if len(bins) == 0 {
		return nil, fmt.Errorf("no binaries: give at least one --binary os/arch=path")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range bins {
		img, err := buildImage(b, m)
		if err != nil {
			return nil, err
		}
		plat := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &plat},
		})
	}
	return mutate.Annotations(idx, m.Labels()).(v1.ImageIndex), nil
}

func buildImage(b Binary, m Meta) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary: %w (run make image, which builds it)", b.Platform.Architecture, err)
	}
	if !isStaticELF(bin) {
		return nil, fmt.Errorf("%s is not a static ELF binary: build it with CGO_ENABLED=0 (the image has no libc)", b.Path)
	}
	files := []file{
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, data: bin},
	}
	if b.ModuleCache != "" {
		cache, err := moduleCacheFiles(b.ModuleCache)
		if err != nil {
			return nil, fmt.Errorf("the %s module cache: %w", b.Platform.Architecture, err)
		}
		files = append(files, cache...)
	}
	layerTar, err := layerTar(m.Created, files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{Created: v1.Time{Time: m.Created}, CreatedBy: "hack/image: " + BinaryPath, Comment: m.Version},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = b.Platform.OS, b.Platform.Architecture, b.Platform.Variant
	cf.Created = v1.Time{Time: m.Created}
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.Cmd = nil
	cf.Config.User = User
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/"}
	cf.Config.Labels = m.Labels()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: m.Created})
}

type file struct {
	name string
	mode int64
	dir  bool
	data []byte
}

// layerTar writes files sorted by name, owned by root, with one timestamp.
func layerTar(mtime time.Time, files []file) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: mtime, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// isStaticELF: an ELF executable without a PT_INTERP program header (a
// dynamic binary names its loader there, which this image does not have).
func isStaticELF(b []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return f.Type == elf.ET_EXEC
}
