package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"
)

const testRepo = "registry.example/team/cloud-provider-equinix-metal"

var testMeta = Meta{Version: "v1.2.3", Revision: "0123abcd", Source: "https://example.com/src", Created: time.Unix(1700000000, 0).UTC()}

// testIndex is a small image index of two platforms whose layers say seed.
func testIndex(t *testing.T, seed string) v1.ImageIndex {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		img, err := mutate.Append(img, mutate.Addendum{
			Layer:     static.NewLayer([]byte(strings.Repeat(seed+" "+arch+" layer\n", 200)), types.OCILayer),
			MediaType: types.OCILayer,
		})
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", arch
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx
}

// testSBOMs describe this test binary (a Go binary with build
// information, as the CCM's is) as if it had been built for each platform.
func testSBOMs(t *testing.T) []SBOM {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bi, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	var out []SBOM
	for _, arch := range []string{"amd64", "arm64"} {
		cp := *bi
		cp.Settings = []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: arch}, {Key: "CGO_ENABLED", Value: "0"}}
		s, err := sbomFor(&cp, testMeta, "cloud-provider-equinix-metal", strings.Repeat("ab", 32))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// testLayout writes a layout of testIndex(seed) with the SBOMs into a new
// directory.
func testLayout(t *testing.T, seed string, sboms []SBOM) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "image")
	if _, err := WriteLayout(dir, testMeta.Version, testIndex(t, seed), sboms); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testKeys makes a key pair with image keygen and loads both halves.
func testKeys(t *testing.T) (signature.SignerVerifier, signature.Verifier) {
	t.Helper()
	t.Setenv(passwordEnv, "")
	key := filepath.Join(t.TempDir(), "cosign.key")
	pub, err := Keygen(key)
	if err != nil {
		t.Fatal(err)
	}
	if pub != strings.TrimSuffix(key, ".key")+".pub" {
		t.Errorf("public key written to %s", pub)
	}
	sv, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sv, v
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	return to
}

// flipByte changes one byte of a blob in place.
func flipByte(t *testing.T, dir string, d v1.Hash) {
	t.Helper()
	p := filepath.Join(dir, "blobs", d.Algorithm, d.Hex)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("verified; want an error naming %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q\ndoes not name %q", err, p)
		}
	}
}

func readLayout(t *testing.T, dir string) *Layout {
	t.Helper()
	l, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// platformManifest is the digest of the arch image manifest of the
// layout's index and that manifest.
func platformManifest(t *testing.T, l *Layout, arch string) (v1.Hash, *v1.Manifest) {
	t.Helper()
	idx, err := l.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			m, err := readManifest(l, d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return d.Digest, m
		}
	}
	t.Fatalf("no %s manifest", arch)
	return v1.Hash{}, nil
}

// TestSignVerify signs a small layout as make image-sign does and checks
// that make image-verify accepts it, and refuses it once anything the
// signature or the digests cover changed, or with another key.
func TestSignVerify(t *testing.T) {
	sv, v := testKeys(t)
	sboms := testSBOMs(t)
	signed := testLayout(t, "one", sboms)

	if _, err := Verify(signed, testRepo, v); err == nil || !strings.Contains(err.Error(), "is not signed") {
		t.Fatalf("an unsigned layout: %v, want it not signed", err)
	}
	got, err := Sign(signed, testRepo, sv)
	if err != nil {
		t.Fatal(err)
	}
	l := readLayout(t, signed)
	sbomDesc, ok := l.SBOM()
	if !ok || len(got) != 2 || got[0].Digest != l.Index.Digest || got[1].Digest != sbomDesc.Digest {
		t.Fatalf("signed %+v, want the index %s and the SBOM", got, l.Index.Digest)
	}
	res, err := Verify(signed, testRepo, v)
	if err != nil {
		t.Fatalf("verify a freshly signed layout: %v", err)
	}
	if res.Index != l.Index.Digest || res.SBOM == nil || *res.SBOM != sbomDesc.Digest || res.Blobs != 17 {
		t.Errorf("verified %+v; want the index, the SBOM and 17 blobs (7 of the image, 4 of the SBOM, 3 per signature)", res)
	}

	t.Run("tampered layer", func(t *testing.T) {
		dir := copyDir(t, signed)
		l := readLayout(t, dir)
		md, m := platformManifest(t, l, "arm64")
		layer := m.Layers[0].Digest
		flipByte(t, dir, layer)
		_, err := Verify(dir, testRepo, v)
		wantErr(t, err, "blob "+layer.String()+" was changed", "layer 1 of 1 of manifest "+md.String()+" (linux/arm64)", "image index "+l.Index.Digest.String())
	})
	t.Run("tampered config", func(t *testing.T) {
		dir := copyDir(t, signed)
		md, m := platformManifest(t, readLayout(t, dir), "amd64")
		flipByte(t, dir, m.Config.Digest)
		_, err := Verify(dir, testRepo, v)
		wantErr(t, err, "blob "+m.Config.Digest.String()+" was changed", "config of manifest "+md.String()+" (linux/amd64)")
	})
	t.Run("tampered SBOM", func(t *testing.T) {
		dir := copyDir(t, signed)
		m, err := readManifest(readLayout(t, dir), sbomDesc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		flipByte(t, dir, m.Layers[1].Digest)
		_, err = Verify(dir, testRepo, v)
		wantErr(t, err, "blob "+m.Layers[1].Digest.String()+" was changed", "cloud-provider-equinix-metal.linux-arm64.cdx.json", "SBOM manifest "+sbomDesc.Digest.String())
	})
	t.Run("payload changed in place", func(t *testing.T) {
		dir := copyDir(t, signed)
		l := readLayout(t, dir)
		sig, _ := l.Signature()
		m, err := readManifest(l, sig.Digest)
		if err != nil {
			t.Fatal(err)
		}
		flipByte(t, dir, m.Layers[0].Digest)
		_, err = Verify(dir, testRepo, v)
		wantErr(t, err, "blob "+m.Layers[0].Digest.String()+" was changed", "signature manifest "+sig.Digest.String())
	})
	t.Run("payload forged", func(t *testing.T) {
		// Another payload (another digest) with the old signature, its
		// digests all made consistent: only the signature can tell.
		dir := copyDir(t, signed)
		l := readLayout(t, dir)
		forgeSignature(t, l, func(pl []byte) []byte {
			return bytes.Replace(pl, []byte(l.Index.Digest.Hex), []byte(strings.Repeat("0", 64)), 1)
		})
		_, err := Verify(dir, testRepo, v)
		wantErr(t, err, "image index "+l.Index.Digest.String()+" has no valid signature by this key", "does not verify with this key")
	})
	t.Run("wrong key", func(t *testing.T) {
		_, other := testKeys(t)
		_, err := Verify(signed, testRepo, other)
		wantErr(t, err, "has no valid signature by this key")
	})
	t.Run("another repository", func(t *testing.T) {
		_, err := Verify(signed, "ghcr.io/someone/else", v)
		wantErr(t, err, "signed for "+testRepo+", not ghcr.io/someone/else")
	})
	t.Run("signature of another index", func(t *testing.T) {
		// The signature of this layout's index, copied under the tag of
		// another index: it verifies, and names the wrong digest.
		other := testLayout(t, "two", sboms)
		lo := readLayout(t, other)
		ls := readLayout(t, signed)
		sig, _ := ls.Signature()
		kept, err := signatureBlobs(signed, ls.Index.Digest)
		if err != nil || kept == nil {
			t.Fatalf("reading the signature: %v", err)
		}
		for _, b := range kept.blobs {
			if err := writeBlob(lo.Path, b); err != nil {
				t.Fatal(err)
			}
		}
		sig.Annotations = map[string]string{annotationRefName: SignatureTag(lo.Index.Digest)}
		if err := writeIndexJSON(lo.Path, append(lo.Manifests, sig)); err != nil {
			t.Fatal(err)
		}
		_, err = Verify(other, testRepo, v)
		wantErr(t, err, "the signed payload names "+ls.Index.Digest.String()+", but the layout's image index is "+lo.Index.Digest.String())
	})
	t.Run("signing again", func(t *testing.T) {
		// Once more with the same key: its signature replaced. Then with
		// another: kept beside it, and either key verifies.
		dir := copyDir(t, signed)
		if _, err := Sign(dir, testRepo, sv); err != nil {
			t.Fatal(err)
		}
		if n := signatureCount(t, dir); n != 1 {
			t.Errorf("signing twice with one key left %d signatures, want 1", n)
		}
		sv2, v2 := testKeys(t)
		if _, err := Sign(dir, testRepo, sv2); err != nil {
			t.Fatal(err)
		}
		if n := signatureCount(t, dir); n != 2 {
			t.Errorf("signing with a second key left %d signatures, want 2", n)
		}
		for _, key := range []signature.Verifier{v, v2} {
			if _, err := Verify(dir, testRepo, key); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("rebuilt from the same inputs", func(t *testing.T) {
		// make image again after make image-sign: the same digests, so the
		// signatures stay.
		dir := copyDir(t, signed)
		kept, err := WriteLayout(dir, testMeta.Version, testIndex(t, "one"), sboms)
		if err != nil || len(kept) != 2 {
			t.Fatalf("kept %v (%v), want the signatures of the index and the SBOM", kept, err)
		}
		if _, err := Verify(dir, testRepo, v); err != nil {
			t.Error(err)
		}
		if kept, err := WriteLayout(dir, testMeta.Version, testIndex(t, "changed"), sboms); err != nil || len(kept) != 0 {
			t.Fatalf("kept %v (%v) of another image", kept, err)
		}
		if _, err := Verify(dir, testRepo, v); err == nil || !strings.Contains(err.Error(), "is not signed") {
			t.Errorf("a changed image kept a signature: %v", err)
		}
	})
	t.Run("refuses to sign a tampered layout", func(t *testing.T) {
		dir := testLayout(t, "three", sboms)
		_, m := platformManifest(t, readLayout(t, dir), "amd64")
		flipByte(t, dir, m.Layers[0].Digest)
		_, err := Sign(dir, testRepo, sv)
		wantErr(t, err, "not signing", m.Layers[0].Digest.String())
	})
}

func signatureCount(t *testing.T, dir string) int {
	t.Helper()
	l := readLayout(t, dir)
	sig, ok := l.Signature()
	if !ok {
		return 0
	}
	m, err := readManifest(l, sig.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return len(m.Layers)
}

// forgeSignature rewrites the payload of the index's signature with edit,
// keeping its signature annotation, and makes every digest on the way
// (payload, signature manifest, index.json) consistent again.
func forgeSignature(t *testing.T, l *Layout, edit func([]byte) []byte) {
	t.Helper()
	sig, _ := l.Signature()
	m, err := readManifest(l, sig.Digest)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := l.Path.Bytes(m.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := blobOf(m.Layers[0].MediaType, edit(pl))
	if err != nil {
		t.Fatal(err)
	}
	if forged.desc.Digest == m.Layers[0].Digest {
		t.Fatal("the edit changed nothing")
	}
	if err := writeBlob(l.Path, forged); err != nil {
		t.Fatal(err)
	}
	forged.desc.Annotations = m.Layers[0].Annotations
	m.Layers[0] = forged.desc
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := blobOf(sig.MediaType, raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeBlob(l.Path, mb); err != nil {
		t.Fatal(err)
	}
	mb.desc.Annotations = sig.Annotations
	if err := writeIndexJSON(l.Path, replaceRef(l.Manifests, sig.Annotations[annotationRefName], mb.desc)); err != nil {
		t.Fatal(err)
	}
}

// TestSBOMArtifact: the layout lists the SBOM as an OCI 1.1 artifact
// whose subject is the image index, one CycloneDX document per platform,
// and two writes of one input are the same bytes.
func TestSBOMArtifact(t *testing.T) {
	sboms := testSBOMs(t)
	dir := testLayout(t, "one", sboms)
	l := readLayout(t, dir)
	if l.Tag() != testMeta.Version || l.Index.Annotations[cosignKind] != cosignKindIndex {
		t.Errorf("the index's annotations %v: want the version as its ref.name and cosign's kind", l.Index.Annotations)
	}
	d, ok := l.SBOM()
	if !ok {
		t.Fatalf("index.json lists no %s artifact: %+v", SBOMArtifactType, l.Manifests)
	}
	m, err := readManifest(l, d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != SBOMArtifactType || m.Config.MediaType != emptyConfigType || m.Subject == nil || m.Subject.Digest != l.Index.Digest || m.Subject.MediaType != types.OCIImageIndex {
		t.Errorf("SBOM manifest %+v: want artifactType %s, the empty config, subject the index %s", m, SBOMArtifactType, l.Index.Digest)
	}
	if len(m.Layers) != 2 {
		t.Fatalf("%d SBOM layers, want one per platform", len(m.Layers))
	}
	for i, ld := range m.Layers {
		b, err := l.Path.Bytes(ld.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, sboms[i].JSON) || ld.MediaType != SBOMArtifactType || ld.Annotations[annotationTitle] != sboms[i].FileName() {
			t.Errorf("SBOM layer %d: %+v", i, ld)
		}
	}
	if _, err := CheckBlobs(l); err != nil {
		t.Error(err)
	}

	again := testLayout(t, "one", testSBOMs(t))
	for _, f := range []string{"index.json", "blobs/sha256/" + d.Digest.Hex} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, err := os.ReadFile(filepath.Join(again, f))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two writes of the same input (%v)", f, err)
		}
	}
}

// TestSBOM reads the document MakeSBOM writes for this test binary back
// with cyclonedx-go: every module the binary's build information lists,
// as linked, with its package URL; the Go version; nothing that changes
// between two runs.
func TestSBOM(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bi, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	b := Binary{Platform: v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}, Path: exe}
	s, err := MakeSBOM(b, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := MakeSBOM(b, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.JSON, s2.JSON) {
		t.Error("two SBOMs of one binary differ")
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(s.JSON), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.SpecVersion != cdx.SpecVersion1_6 || !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") || bom.Metadata.Timestamp != "2023-11-14T22:13:20Z" {
		t.Errorf("spec %s, serial %q, timestamp %q", bom.SpecVersion, bom.SerialNumber, bom.Metadata.Timestamp)
	}
	mc := bom.Metadata.Component
	if mc.Name != bi.Main.Path || mc.Version != testMeta.Version || !strings.HasPrefix(mc.PackageURL, "pkg:golang/"+bi.Main.Path+"@v1.2.3?") {
		t.Errorf("main component %s %s %s", mc.Name, mc.Version, mc.PackageURL)
	}
	props := map[string]string{}
	for _, p := range *bom.Metadata.Properties {
		props[p.Name] = p.Value
	}
	if props["cdx:gomod:build:env:GOVERSION"] != bi.GoVersion || len(props["cdx:gomod:binary:hash:SHA-256"]) != 64 {
		t.Errorf("metadata properties %v: want the Go version %s and the binary's SHA-256", props, bi.GoVersion)
	}
	byName := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		byName[c.Name] = c
	}
	if std := byName["std"]; std.Version != bi.GoVersion || std.PackageURL != "pkg:golang/std@"+bi.GoVersion+"?type=module" {
		t.Errorf("std component %+v", std)
	}
	if len(*bom.Components) != len(bi.Deps)+1 {
		t.Errorf("%d components, want the %d modules of the build information and std", len(*bom.Components), len(bi.Deps))
	}
	for _, d := range bi.Deps {
		if d.Replace != nil && !isDirectory(d.Replace.Path) {
			d = d.Replace
		}
		c, ok := byName[d.Path]
		switch {
		case !ok:
			t.Errorf("no component for %s", d.Path)
		case isDirectory(d.Path) || d.Replace != nil && isDirectory(d.Replace.Path):
			// built from this repository: the CCM's version
		case c.Version != d.Version || c.PackageURL != purl(d.Path, d.Version)+"?type=module" || c.Hashes == nil:
			t.Errorf("component %+v for %s %s", c, d.Path, d.Version)
		}
	}
	other := b
	other.Platform.Architecture += "-other"
	if _, err := MakeSBOM(other, testMeta); err == nil || !strings.Contains(err.Error(), "but was built for "+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("the SBOM of a binary of another platform: %v", err)
	}
	if got := purl("github.com/docker/cli", "v29.7.2+incompatible"); got != "pkg:golang/github.com/docker/cli@v29.7.2%2Bincompatible" {
		t.Errorf("purl escapes %s", got)
	}
}

// TestKeys: image keygen encrypts the key as cosign does when
// COSIGN_PASSWORD is set, signing then wants the password, and keygen
// overwrites no key.
func TestKeys(t *testing.T) {
	key := filepath.Join(t.TempDir(), "release.key")
	t.Setenv(passwordEnv, "correct horse")
	pub, err := Keygen(key)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(key); !strings.Contains(string(b), "ENCRYPTED SIGSTORE PRIVATE KEY") {
		t.Errorf("with %s set, the key is not encrypted as cosign's are:\n%s", passwordEnv, b)
	}
	sv, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sv.SignMessage(strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), strings.NewReader("payload")); err != nil {
		t.Errorf("the public key beside the private one does not verify it: %v", err)
	}
	t.Setenv(passwordEnv, "wrong")
	if _, err := LoadSigner(key); err == nil {
		t.Error("an encrypted key loaded with the wrong password")
	}
	_ = os.Unsetenv(passwordEnv) // t.Setenv restores it
	if _, err := LoadSigner(key); err == nil || !strings.Contains(err.Error(), "set "+passwordEnv) {
		t.Errorf("an encrypted key without a password: %v", err)
	}
	if _, err := Keygen(key); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Errorf("keygen over an existing key: %v", err)
	}
	if _, err := LoadSigner(pub); err == nil {
		t.Error("a public key loaded as the private one")
	}
}
