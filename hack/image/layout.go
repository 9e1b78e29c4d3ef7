package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The OCI layout make image writes (bin/image). Its index.json lists:
//
//   - the image index (linux/amd64 and linux/arm64), tagged with the version
//     (org.opencontainers.image.ref.name) and marked as cosign's saved
//     image index (kind), so `cosign verify --local-image` finds it;
//   - the SBOM: an OCI 1.1 artifact manifest (artifactType
//     application/vnd.cyclonedx+json, one CycloneDX JSON layer per
//     platform) whose subject is the image index, as a registry's referrers
//     API lists it (`oras discover`);
//   - once make image-sign ran, the signature: cosign's signature manifest,
//     tagged as cosign tags it (sha256-<index hex>.sig).
//
// The image index is the same blob whether or not the SBOM and a signature
// sit beside it: what is pushed, pulled and signed is its digest.
const (
	annotationRefName = "org.opencontainers.image.ref.name"
	annotationTitle   = "org.opencontainers.image.title"
	annotationCreated = "org.opencontainers.image.created"

	// cosign's annotations of a saved layout (cosign save; read by
	// cosign verify --local-image).
	cosignKind          = "kind"
	cosignKindIndex     = "dev.cosignproject.cosign/imageIndex"
	cosignKindSignature = "dev.cosignproject.cosign/sigs"

	// SBOMArtifactType is the artifactType of the SBOM manifest and the
	// media type of its layers.
	SBOMArtifactType = "application/vnd.cyclonedx+json"
	// emptyConfigType is OCI 1.1's config of an artifact without one.
	emptyConfigType types.MediaType = "application/vnd.oci.empty.v1+json"
)

var emptyJSON = []byte("{}")

// WriteLayout writes idx as a fresh OCI layout in dir, tagged tag, with
// the SBOM artifact made of sboms (one per platform) referring to it. A
// signature of the same index or SBOM digest that dir already held (make
// image-sign, then make image again from the same commit) is kept: it
// still signs these bytes; kept lists their tags.
func WriteLayout(dir, tag string, idx v1.ImageIndex, sboms []SBOM) (kept []string, err error) {
	idxDesc, err := descriptorOf(idx)
	if err != nil {
		return nil, err
	}
	manifests := []v1.Descriptor{idxDesc}
	manifests[0].Annotations = map[string]string{annotationRefName: tag, cosignKind: cosignKindIndex}
	var blobs []blob
	if len(sboms) > 0 {
		sbomDesc, sbomBlobs, err := sbomArtifact(idxDesc, sboms)
		if err != nil {
			return nil, err
		}
		manifests = append(manifests, sbomDesc)
		blobs = append(blobs, sbomBlobs...)
	}
	signed := append([]v1.Descriptor(nil), manifests...)
	for _, d := range signed {
		// An old signature that cannot be read whole is not kept: the
		// layout is then unsigned, as image-verify says.
		if sig, err := signatureBlobs(dir, d.Digest); err == nil && sig != nil {
			manifests = append(manifests, sig.desc)
			blobs = append(blobs, sig.blobs...)
			kept = append(kept, SignatureTag(d.Digest))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := p.WriteIndex(idx); err != nil {
		return nil, err
	}
	for _, b := range blobs {
		if err := writeBlob(p, b); err != nil {
			return nil, err
		}
	}
	return kept, writeIndexJSON(p, manifests)
}

// descriptorOf is idx's descriptor without annotations.
func descriptorOf(idx v1.ImageIndex) (v1.Descriptor, error) {
	raw, err := idx.RawManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	d, size, err := v1.SHA256(bytes.NewReader(raw))
	return v1.Descriptor{MediaType: mt, Size: size, Digest: d}, err
}

// sbomArtifact is the SBOM manifest's descriptor for index.json, and the
// blobs to write: the manifest, its empty config, one layer per SBOM.
func sbomArtifact(subject v1.Descriptor, sboms []SBOM) (v1.Descriptor, []blob, error) {
	subject.Annotations = nil
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMArtifactType,
		Subject:       &subject,
		Annotations:   map[string]string{annotationCreated: sboms[0].Created},
	}
	cfg, err := blobOf(emptyConfigType, emptyJSON)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	m.Config = cfg.desc
	blobs := []blob{cfg}
	for _, s := range sboms {
		b, err := blobOf(SBOMArtifactType, s.JSON)
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		blobs = append(blobs, b)
		b.desc.Annotations = map[string]string{annotationTitle: s.FileName()}
		m.Layers = append(m.Layers, b.desc)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	mb, err := blobOf(types.OCIManifestSchema1, raw)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	desc := mb.desc
	desc.ArtifactType = SBOMArtifactType
	return desc, append(blobs, mb), nil
}

type blob struct {
	desc v1.Descriptor
	data []byte
}

func blobOf(mt types.MediaType, data []byte) (blob, error) {
	d, size, err := v1.SHA256(bytes.NewReader(data))
	return blob{desc: v1.Descriptor{MediaType: mt, Size: size, Digest: d}, data: data}, err
}

func writeBlob(p layout.Path, b blob) error {
	return p.WriteBlob(b.desc.Digest, io.NopCloser(bytes.NewReader(b.data)))
}

// writeIndexJSON rewrites the layout's index.json with these manifests.
func writeIndexJSON(p layout.Path, manifests []v1.Descriptor) error {
	raw, err := json.MarshalIndent(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests:     manifests,
	}, "", "  ")
	if err != nil {
		return err
	}
	return p.WriteFile("index.json", append(raw, '\n'), 0o644)
}

// Layout is a layout make image wrote, read back: the descriptors of its
// index.json and the image index among them.
type Layout struct {
	Path      layout.Path
	Manifests []v1.Descriptor
	Index     v1.Descriptor // the image index's descriptor in index.json
}

// ReadLayout reads dir's index.json and finds the one image index in it.
func ReadLayout(dir string) (*Layout, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, fmt.Errorf("%w (run make image first)", err)
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(raw, &im); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "index.json"), err)
	}
	l := &Layout{Path: layout.Path(dir), Manifests: im.Manifests}
	n := 0
	for _, d := range im.Manifests {
		if d.MediaType.IsIndex() {
			l.Index, n = d, n+1
		}
	}
	switch n {
	case 1:
		return l, nil
	case 0:
		return nil, fmt.Errorf("%s lists no image index (a layout of an older make image? run make image again)", filepath.Join(dir, "index.json"))
	default:
		return nil, fmt.Errorf("%s lists %d image indexes, want the one make image writes", filepath.Join(dir, "index.json"), n)
	}
}

// ImageIndex is the layout's image index: what image-push pushes as the
// version's tag and image-sign signs.
func (l *Layout) ImageIndex() (v1.ImageIndex, error) {
	ii, err := l.Path.ImageIndex()
	if err != nil {
		return nil, err
	}
	return ii.ImageIndex(l.Index.Digest)
}

// Tag is the version the image index is tagged with in the layout.
func (l *Layout) Tag() string { return l.Index.Annotations[annotationRefName] }

// SignatureTag is cosign's tag of the signatures of an image digest.
func SignatureTag(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + ".sig" }

// Signature is the descriptor of the signature manifest of the image index,
// if there is one.
func (l *Layout) Signature() (v1.Descriptor, bool) {
	return l.find(SignatureTag(l.Index.Digest))
}

// SBOM is the descriptor of the SBOM artifact referring to the image index,
// if there is one.
func (l *Layout) SBOM() (v1.Descriptor, bool) {
	for _, d := range l.Manifests {
		if d.ArtifactType == SBOMArtifactType {
			return d, true
		}
	}
	return v1.Descriptor{}, false
}

func (l *Layout) find(refName string) (v1.Descriptor, bool) {
	for _, d := range l.Manifests {
		if d.Annotations[annotationRefName] == refName {
			return d, true
		}
	}
	return v1.Descriptor{}, false
}

type keptSignature struct {
	desc  v1.Descriptor
	blobs []blob
}

// signatureBlobs reads the signature manifest of digest d and its blobs
// from the layout in dir, if dir is one and has it; nil otherwise.
func signatureBlobs(dir string, d v1.Hash) (*keptSignature, error) {
	l, err := ReadLayout(dir)
	if err != nil {
		return nil, nil // no layout, or not one of ours: nothing to keep
	}
	desc, ok := l.find(SignatureTag(d))
	if !ok {
		return nil, nil
	}
	k := &keptSignature{desc: desc}
	read := func(desc v1.Descriptor) error {
		b, err := l.Path.Bytes(desc.Digest)
		if err != nil {
			return err
		}
		if got, _, _ := v1.SHA256(bytes.NewReader(b)); got != desc.Digest {
			return errors.New("content does not match its digest")
		}
		k.blobs = append(k.blobs, blob{desc: desc, data: b})
		return nil
	}
	if err := read(desc); err != nil {
		return nil, fmt.Errorf("keeping the signature of %s: %w", d, err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(k.blobs[0].data, &m); err != nil {
		return nil, fmt.Errorf("keeping the signature of %s: %w", d, err)
	}
	for _, desc := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if err := read(desc); err != nil {
			return nil, fmt.Errorf("keeping the signature of %s: blob %s: %w", d, desc.Digest, err)
		}
	}
	return k, nil
}
