//go:build system

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/modules"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

func makeTarget(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-s", "-C", repoRoot(t)}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestMakeImage runs `make image` as a person would (with the README's
// REGISTRY) twice, into two bin directories, and checks the image: two
// platforms, entrypoint, numeric non-root user, nothing but the binary,
// /tmp (so no shell) and, in the image of this machine's platform, the
// built-in modules compiled (checkModuleCache), labels, the amd64 binary's --version, the SBOM
// attached to the index (checkSBOM), and the same index digest and
// index.json from both builds. The second build recompiles nothing (the
// Go build cache holds the packages) but links both binaries and assembles
// the image again from them; with -trimpath, -buildvcs=false and the commit
// time as the only timestamp, the same commit gives the same bytes.
//
// It carries the build tag system, so `make test` and a plain `go test
// ./...` leave it out; `make system` (part of make ci) builds the two
// images first (target image-check) and names their bin directories in
// $METAL_CCM_IMAGE_BUILDS:
// cross-compiling two platforms on an empty build cache takes longer on two
// cores than go test's default 10-minute limit per package, and a limit
// that depends on how warm the cache is would fail only on fresh machines.
// Run alone (`go test -tags system ./hack/image`), the test builds them
// itself.
func TestMakeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CCM for two platforms; run without -short")
	}
	version := strings.TrimSpace(makeTarget(t, "version"))
	revision := strings.TrimSpace(gitOut(t, "rev-parse", "HEAD"))
	bin1, bin2 := imageBuilds(t)

	l1, err := ReadLayout(filepath.Join(bin1, "image"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := l1.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var plats []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		plats = append(plats, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, d.Platform.String(), version, revision)
		if d.Platform.Architecture == "amd64" {
			checkVersion(t, img, version)
		}
	}
	slices.Sort(plats)
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(plats, want) {
		t.Errorf("platforms %v, want %v", plats, want)
	}

	t.Run("stamped chart and manifests", func(t *testing.T) {
		checkStamped(t, filepath.Join(bin1, "deploy"), version, readmeRegistry+"/cloud-provider-equinix-metal")
	})

	t.Run("SBOM", func(t *testing.T) { checkSBOM(t, l1, version) })

	l2, err := ReadLayout(filepath.Join(bin2, "image"))
	if err != nil {
		t.Fatal(err)
	}
	d1, d2 := l1.Index.Digest, l2.Index.Digest
	if d1 != d2 {
		t.Errorf("two builds of one commit: %s and %s", d1, d2)
	}
	// index.json lists the SBOM by digest too: the same file, the same
	// SBOM.
	j1, _ := os.ReadFile(filepath.Join(bin1, "image", "index.json"))
	j2, err := os.ReadFile(filepath.Join(bin2, "image", "index.json"))
	if err != nil || string(j1) != string(j2) {
		t.Errorf("two builds of one commit: index.json differs (%v):\n%s\n%s", err, j1, j2)
	}
	t.Logf("image %s: index %s (both builds)", version, d1)

	t.Run("README install", func(t *testing.T) { checkReadmeInstall(t, filepath.Join(bin1, "deploy"), version) })
}

// checkSBOM: the layout lists the SBOM artifact of its image index, one
// CycloneDX document per platform describing that platform's binary, and
// every blob matches its digest.
func checkSBOM(t *testing.T, l *Layout, version string) {
	t.Helper()
	d, ok := l.SBOM()
	if !ok {
		t.Fatalf("index.json lists no %s artifact", SBOMArtifactType)
	}
	m, err := readManifest(l, d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || m.Subject.Digest != l.Index.Digest {
		t.Errorf("the SBOM's subject is %v, want the image index %s", m.Subject, l.Index.Digest)
	}
	var titles []string
	for _, ld := range m.Layers {
		titles = append(titles, ld.Annotations[annotationTitle])
		b, err := l.Path.Bytes(ld.Digest)
		if err != nil {
			t.Fatal(err)
		}
		var bom cdx.BOM
		if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
			t.Fatalf("%s: %v", ld.Annotations[annotationTitle], err)
		}
		arch := ""
		for _, p := range *bom.Metadata.Properties {
			if p.Name == "cdx:gomod:build:env:GOARCH" {
				arch = p.Value
			}
		}
		n := 0
		if bom.Components != nil {
			n = len(*bom.Components)
		}
		if bom.Metadata.Component.Version != version || !strings.Contains(ld.Annotations[annotationTitle], "linux-"+arch+".") || n < 50 {
			t.Errorf("%s: version %s, GOARCH %s, %d components", ld.Annotations[annotationTitle], bom.Metadata.Component.Version, arch, n)
		}
	}
	if want := []string{"cloud-provider-equinix-metal.linux-amd64.cdx.json", "cloud-provider-equinix-metal.linux-arm64.cdx.json"}; !slices.Equal(titles, want) {
		t.Errorf("SBOM layers %v, want %v", titles, want)
	}
	if n, err := CheckBlobs(l); err != nil {
		t.Error(err)
	} else {
		t.Logf("SBOM %s; %d blobs match their digests", d.Digest, n)
	}
}

// imageBuilds returns the bin directories of two `make image` runs with the
// README's REGISTRY: the ones make system built ($METAL_CCM_IMAGE_BUILDS,
// two paths separated by the list separator), or two built here.
func imageBuilds(t *testing.T) (string, string) {
	t.Helper()
	if env := os.Getenv("METAL_CCM_IMAGE_BUILDS"); env != "" {
		dirs := filepath.SplitList(env)
		if len(dirs) != 2 {
			t.Fatalf("METAL_CCM_IMAGE_BUILDS=%q names %d directories; it takes two bin directories of make image, separated by %q", env, len(dirs), string(os.PathListSeparator))
		}
		return dirs[0], dirs[1]
	}
	tmp := t.TempDir()
	bin1, bin2 := filepath.Join(tmp, "bin1"), filepath.Join(tmp, "bin2")
	makeTarget(t, "image", "REGISTRY="+readmeRegistry, "BIN_DIR="+bin1)
	makeTarget(t, "image", "REGISTRY="+readmeRegistry, "BIN_DIR="+bin2)
	return bin1, bin2
}

var numericUser = regexp.MustCompile(`^[1-9][0-9]*(:[0-9]+)?$`)

func checkImage(t *testing.T, img v1.Image, plat, version, revision string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Platform().String(); got != plat {
		t.Errorf("%s: config says %s", plat, got)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{BinaryPath}) {
		t.Errorf("%s: entrypoint %v", plat, cf.Config.Entrypoint)
	}
	if !numericUser.MatchString(cf.Config.User) {
		t.Errorf("%s: user %q is not a numeric non-root user", plat, cf.Config.User)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.source":   "https://github.com/metal-ccm/cloud-provider-equinix-metal",
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("%s: label %s = %q, want %q", plat, k, got, want)
		}
	}
	files := listFiles(t, img)
	cacheRoot := strings.TrimPrefix(lbmodule.ImageCacheDir, "/")
	var rest, cache []string
	for _, f := range files {
		if strings.HasPrefix(cacheRoot+"/", f) || strings.HasPrefix(f, cacheRoot+"/") {
			cache = append(cache, f)
		} else {
			rest = append(rest, f)
		}
	}
	if want := []string{"cloud-provider-equinix-metal", "tmp/"}; !slices.Equal(rest, want) {
		t.Errorf("%s: filesystem %v, want only %v and the module cache", plat, rest, want)
	}
	if plat == NativePlatform {
		checkModuleCache(t, img)
	} else if len(cache) > 0 {
		t.Errorf("%s: a module cache although it was built on %s: %v", plat, NativePlatform, cache)
	}
	for _, f := range files {
		if base := path.Base(f); base == "sh" || base == "bash" || base == "busybox" {
			t.Errorf("%s: a shell in the image: %s", plat, f)
		}
	}
}

// checkModuleCache extracts the image's compiled modules, seeds an empty
// module cache from them as the CCM does, and loads every built-in: each
// load must find its code there (the seeded links stay links: wazero
// replaces an entry it compiles with a file).
func checkModuleCache(t *testing.T, img v1.Image) {
	t.Helper()
	image := filepath.Join(t.TempDir(), "image")
	eachEntry(t, img, func(h *tar.Header, r io.Reader) {
		rel, ok := strings.CutPrefix("/"+strings.TrimSuffix(h.Name, "/"), lbmodule.ImageCacheDir+"/")
		if !ok || h.Typeflag != tar.TypeReg {
			return
		}
		dst := filepath.Join(image, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o444); err != nil {
			t.Fatal(err)
		}
	})
	cache := t.TempDir()
	n, err := lbmodule.SeedCache(image, cache)
	if err != nil || n != len(modules.Names) {
		t.Fatalf("%s: seeding from the image's module cache linked %d entries (%v), want one per built-in (%d)", NativePlatform, n, err, len(modules.Names))
	}
	for _, name := range modules.Names {
		wasm, err := modules.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := wasmhost.LoadBytes(context.Background(), name, wasm, sdk.Options{}, wasmhost.Options{CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		m.Close(context.Background())
	}
	_ = filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			t.Errorf("%s: %s was compiled at load: the image's module cache does not hold it", NativePlatform, p)
		}
		return err
	})
}

func listFiles(t *testing.T, img v1.Image) []string {
	t.Helper()
	var names []string
	eachEntry(t, img, func(h *tar.Header, _ io.Reader) {
		// mutate.Extract cleans names ("tmp/" becomes "tmp"); a directory
		// is listed with its slash so the check also says it is one.
		name := strings.TrimSuffix(h.Name, "/")
		if h.Typeflag == tar.TypeDir {
			name += "/"
		}
		names = append(names, name)
	})
	slices.Sort(names)
	return names
}

// eachEntry calls fn with every entry of the image's flattened filesystem
// and a reader of its contents.
func eachEntry(t *testing.T, img v1.Image, fn func(*tar.Header, io.Reader)) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(h, tr)
	}
}

// checkVersion extracts the amd64 binary and runs --version.
func checkVersion(t *testing.T, img v1.Image, version string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	bin := filepath.Join(t.TempDir(), "ccm")
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no binary in the layer: %v", err)
		}
		if "/"+h.Name != BinaryPath {
			continue
		}
		f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		break
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if want := "cloud-provider-equinix-metal " + version + " "; !strings.HasPrefix(string(out), want) {
		t.Errorf("--version printed %q, want it to start with %q", out, want)
	}
}

func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repoRoot(t)}, args...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
