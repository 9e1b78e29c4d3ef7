package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Signatures in cosign's format (what `cosign sign --key` writes and
// `cosign verify --key` reads): the payload is the simple-signing JSON
// naming the signed digest, the signature ECDSA P-256 with SHA-256 over it,
// in a manifest whose one layer per signature is the payload, with the
// base64 signature as an annotation, tagged sha256-<hex>.sig.
const simpleSigningType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"

const (
	signatureAnnotation = "dev.cosignproject.cosign/signature"
	// passwordEnv is the password of an encrypted key, cosign's variable.
	passwordEnv = "COSIGN_PASSWORD"
)

// LoadSigner reads a PEM ECDSA P-256 private key: PKCS#8 ("PRIVATE
// KEY", what image keygen and `openssl genpkey` write), SEC 1 ("EC PRIVATE
// KEY", openssl ecparam), or cosign's encrypted key (cosign
// generate-key-pair) with its password in $COSIGN_PASSWORD.
func LoadSigner(path string) (signature.SignerVerifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pf cryptoutils.PassFunc
	if pw, ok := os.LookupEnv(passwordEnv); ok {
		pf = cryptoutils.StaticPasswordFunc([]byte(pw))
	} else if blk, _ := pem.Decode(b); blk != nil && strings.Contains(blk.Type, "ENCRYPTED") {
		return nil, fmt.Errorf("%s is encrypted (%s): set %s to its password", path, blk.Type, passwordEnv)
	}
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(b, pf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (want a PEM ECDSA P-256 private key: go run ./hack/image keygen writes one)", path, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: a %T, want an ECDSA P-256 key", path, key)
	}
	return signature.LoadECDSASignerVerifier(ec, crypto.SHA256)
}

// LoadVerifier reads a PEM ECDSA P-256 public key (PKIX, "PUBLIC KEY": what
// image keygen, cosign and openssl write).
func LoadVerifier(path string) (signature.Verifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := cryptoutils.UnmarshalPEMToPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (want a PEM public key)", path, err)
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: a %T, want an ECDSA P-256 key", path, key)
	}
	return signature.LoadECDSAVerifier(ec, crypto.SHA256)
}

// Keygen writes a new ECDSA P-256 key pair: the private key at keyPath
// (PKCS#8 PEM, mode 0600; encrypted as cosign encrypts its keys when
// $COSIGN_PASSWORD is set) and the public key beside it, keyPath with the
// extension .pub. It overwrites neither.
func Keygen(keyPath string) (pubPath string, err error) {
	pubPath = strings.TrimSuffix(keyPath, filepath.Ext(keyPath)) + ".pub"
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", fmt.Errorf("%s exists: not overwriting a key", p)
		}
	}
	var pf cryptoutils.PassFunc
	if pw, ok := os.LookupEnv(passwordEnv); ok && pw != "" {
		pf = cryptoutils.StaticPasswordFunc([]byte(pw))
	}
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
	if err != nil {
		return "", err
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{keyPath, priv, 0o600}, {pubPath, pub, 0o644}} {
		w, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return "", err
		}
		if _, err := w.Write(f.data); err != nil {
			_ = w.Close()
			return "", err
		}
		if err := w.Close(); err != nil {
			return "", err
		}
	}
	return pubPath, nil
}

// Signed is one digest image-sign signed.
type Signed struct {
	What   string // "image index" or "SBOM"
	Digest v1.Hash
	Tag    string // the signature's tag
}

// Sign signs the layout's image index, and its SBOM when it has one, for
// repo (registry/repository, the payload's docker-reference), after
// checking every blob of the layout. A signature already there by the same
// key is replaced; another key's is kept beside it (cosign's layers).
func Sign(dir, repo string, sv signature.SignerVerifier) ([]Signed, error) {
	r, err := name.NewRepository(repo)
	if err != nil {
		return nil, fmt.Errorf("--ref %q: %w (want registry/repository, the image's name without a tag)", repo, err)
	}
	l, err := ReadLayout(dir)
	if err != nil {
		return nil, err
	}
	if _, err := CheckBlobs(l); err != nil {
		return nil, fmt.Errorf("not signing %s: %w", dir, err)
	}
	targets := []Signed{{What: "image index", Digest: l.Index.Digest}}
	if d, ok := l.SBOM(); ok {
		targets = append(targets, Signed{What: "SBOM", Digest: d.Digest})
	}
	manifests := l.Manifests
	for i, t := range targets {
		t.Tag = SignatureTag(t.Digest)
		targets[i] = t
		pl, err := payload.Cosign{Image: r.Digest(t.Digest.String())}.MarshalJSON()
		if err != nil {
			return nil, err
		}
		sig, err := sv.SignMessage(bytes.NewReader(pl))
		if err != nil {
			return nil, err
		}
		layers, err := otherKeysSignatures(l, t.Tag, sv)
		if err != nil {
			return nil, err
		}
		layers = append(layers, sigLayer{
			Layer:       static.NewLayer(pl, simpleSigningType),
			annotations: map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
		})
		img, err := signatureImage(layers)
		if err != nil {
			return nil, err
		}
		if err := l.Path.WriteImage(img); err != nil {
			return nil, err
		}
		desc, err := partial.Descriptor(img)
		if err != nil {
			return nil, err
		}
		desc.Annotations = map[string]string{annotationRefName: t.Tag}
		if i == 0 {
			// cosign verify --local-image reads the first manifest of
			// this kind: the image index's.
			desc.Annotations[cosignKind] = cosignKindSignature
		}
		manifests = replaceRef(manifests, t.Tag, *desc)
	}
	return targets, writeIndexJSON(l.Path, manifests)
}

type sigLayer struct {
	v1.Layer
	annotations map[string]string
}

// signatureImage is cosign's signature manifest of these layers: OCI media
// types, the empty config go-containerregistry makes (cosign's too).
func signatureImage(layers []sigLayer) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, sl := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: sl.Layer, Annotations: sl.annotations, MediaType: simpleSigningType})
		if err != nil {
			return nil, err
		}
	}
	return img, nil
}

// otherKeysSignatures are the signatures under tag in the layout that v
// does not verify: signing again with one key replaces its signature and
// keeps the others'.
func otherKeysSignatures(l *Layout, tag string, v signature.Verifier) ([]sigLayer, error) {
	desc, ok := l.find(tag)
	if !ok {
		return nil, nil
	}
	m, err := readManifest(l, desc.Digest)
	if err != nil {
		return nil, err
	}
	var keep []sigLayer
	for _, ld := range m.Layers {
		pl, err := l.Path.Bytes(ld.Digest)
		if err != nil {
			return nil, err
		}
		if sig, err := base64.StdEncoding.DecodeString(ld.Annotations[signatureAnnotation]); err == nil && v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(pl)) == nil {
			continue
		}
		keep = append(keep, sigLayer{Layer: static.NewLayer(pl, ld.MediaType), annotations: ld.Annotations})
	}
	return keep, nil
}

// replaceRef drops the descriptors tagged ref and appends d.
func replaceRef(ds []v1.Descriptor, ref string, d v1.Descriptor) []v1.Descriptor {
	var out []v1.Descriptor
	for _, x := range ds {
		if x.Annotations[annotationRefName] != ref {
			out = append(out, x)
		}
	}
	return append(out, d)
}

func readManifest(l *Layout, d v1.Hash) (*v1.Manifest, error) {
	b, err := l.Path.Bytes(d)
	if err != nil {
		return nil, err
	}
	var m v1.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d, err)
	}
	return &m, nil
}

// Verified is what Verify checked.
type Verified struct {
	Index v1.Hash
	Tag   string
	SBOM  *v1.Hash // nil: the layout has no SBOM
	Blobs int      // blobs checked against their digests
}

// Verify checks the layout in dir: every blob reachable from its
// index.json against its digest (a changed layer, config, manifest, SBOM
// or signature payload fails, naming the blob and what references it), and
// a signature by v of the image index, and of the SBOM when there is one,
// whose payload names that digest and, if repo is not empty, that
// repository.
func Verify(dir, repo string, v signature.Verifier) (*Verified, error) {
	l, err := ReadLayout(dir)
	if err != nil {
		return nil, err
	}
	n, err := CheckBlobs(l)
	if err != nil {
		return nil, err
	}
	res := &Verified{Index: l.Index.Digest, Tag: l.Tag(), Blobs: n}
	if err := verifySignature(l, "image index", l.Index.Digest, repo, v); err != nil {
		return nil, err
	}
	if d, ok := l.SBOM(); ok {
		m, err := readManifest(l, d.Digest)
		if err != nil {
			return nil, err
		}
		if m.Subject == nil || m.Subject.Digest != l.Index.Digest {
			return nil, fmt.Errorf("the SBOM manifest %s does not refer to the image index %s (its subject is %v)", d.Digest, l.Index.Digest, m.Subject)
		}
		if err := verifySignature(l, "SBOM", d.Digest, repo, v); err != nil {
			return nil, err
		}
		res.SBOM = &d.Digest
	}
	return res, nil
}

// verifySignature finds the signatures of d (tag sha256-<hex>.sig) and
// wants one that v verifies and whose payload names d (and repo).
func verifySignature(l *Layout, what string, d v1.Hash, repo string, v signature.Verifier) error {
	tag := SignatureTag(d)
	desc, ok := l.find(tag)
	if !ok {
		return fmt.Errorf("the %s %s is not signed: no %s in the layout (make image-sign KEY=...)", what, d, tag)
	}
	m, err := readManifest(l, desc.Digest)
	if err != nil {
		return err
	}
	var why []string
	for i, ld := range m.Layers {
		where := fmt.Sprintf("signature %d of %s (blob %s)", i+1, tag, ld.Digest)
		pl, err := l.Path.Bytes(ld.Digest)
		if err != nil {
			return err
		}
		sig, err := base64.StdEncoding.DecodeString(ld.Annotations[signatureAnnotation])
		if err != nil || len(sig) == 0 {
			why = append(why, where+": no base64 "+signatureAnnotation+" annotation")
			continue
		}
		if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(pl)); err != nil {
			why = append(why, where+": does not verify with this key over its payload")
			continue
		}
		// Signed by this key: now the payload must be about d.
		var sci payload.SimpleContainerImage
		if err := json.Unmarshal(pl, &sci); err != nil {
			return fmt.Errorf("%s: the signed payload is not simple-signing JSON: %w", where, err)
		}
		if sci.Critical.Type != payload.CosignSignatureType {
			return fmt.Errorf("%s: the signed payload's type is %q, want %q", where, sci.Critical.Type, payload.CosignSignatureType)
		}
		if got := sci.Critical.Image.DockerManifestDigest; got != d.String() {
			return fmt.Errorf("%s: the signed payload names %s, but the layout's %s is %s", where, got, what, d)
		}
		if got := sci.Critical.Identity.DockerReference; repo != "" && got != repo {
			return fmt.Errorf("%s: signed for %s, not %s (set REGISTRY as for make image-sign)", where, got, repo)
		}
		return nil
	}
	if len(why) == 0 {
		why = append(why, tag+" has no signature layer")
	}
	return fmt.Errorf("the %s %s has no valid signature by this key:\n  %s", what, d, strings.Join(why, "\n  "))
}

// CheckBlobs hashes every blob reachable from the layout's index.json (the
// image index, its manifests, configs and layers; the SBOM artifact; the
// signatures and their payloads) and compares it with the digest and size
// its descriptor gives. It returns how many blobs it checked, or every
// mismatch, each naming the blob and the manifest that references it.
func CheckBlobs(l *Layout) (int, error) {
	c := &blobCheck{l: l, seen: map[v1.Hash]bool{}}
	for _, d := range l.Manifests {
		role := roleOf(l, d)
		c.check(d, role+", listed in index.json", role)
	}
	return len(c.seen), errors.Join(c.errs...)
}

func roleOf(l *Layout, d v1.Descriptor) string {
	switch {
	case d.Digest == l.Index.Digest:
		return fmt.Sprintf("image index %s (%s)", d.Digest, l.Tag())
	case d.ArtifactType == SBOMArtifactType:
		return fmt.Sprintf("SBOM manifest %s", d.Digest)
	case strings.HasSuffix(d.Annotations[annotationRefName], ".sig"):
		return fmt.Sprintf("signature manifest %s (%s)", d.Digest, d.Annotations[annotationRefName])
	}
	return fmt.Sprintf("manifest %s", d.Digest)
}

type blobCheck struct {
	l    *Layout
	seen map[v1.Hash]bool
	errs []error
}

// check compares one blob with its descriptor: what says what the blob is
// and which manifest references it, name how its own references name it.
// A manifest or index is read and what it references checked after it.
func (c *blobCheck) check(d v1.Descriptor, what, name string) {
	if c.seen[d.Digest] {
		return
	}
	c.seen[d.Digest] = true
	b, err := c.hashBlob(d, what)
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	switch {
	case d.MediaType.IsIndex():
		var im v1.IndexManifest
		if err := json.Unmarshal(b, &im); err != nil {
			c.errs = append(c.errs, fmt.Errorf("blob %s (%s): %w", d.Digest, what, err))
			return
		}
		for i, m := range im.Manifests {
			child := "manifest " + m.Digest.String()
			if m.Platform != nil {
				child += " (" + m.Platform.String() + ")"
			}
			child += " of " + name
			c.check(m, fmt.Sprintf("manifest %d of %d of %s", i+1, len(im.Manifests), name), child)
		}
	case d.MediaType.IsImage():
		var m v1.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			c.errs = append(c.errs, fmt.Errorf("blob %s (%s): %w", d.Digest, what, err))
			return
		}
		c.check(m.Config, "config of "+name, "config of "+name)
		for i, ld := range m.Layers {
			title := ""
			if t := ld.Annotations[annotationTitle]; t != "" {
				title = ", " + t + ","
			}
			w := fmt.Sprintf("layer %d of %d%s of %s", i+1, len(m.Layers), title, name)
			c.check(ld, w, w)
		}
	}
}

// hashBlob streams one blob through SHA-256 and returns its bytes when it
// is a manifest or index (small; the walk reads them).
func (c *blobCheck) hashBlob(d v1.Descriptor, what string) ([]byte, error) {
	rc, err := c.l.Path.Blob(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("blob %s is missing (%s): %w", d.Digest, what, err)
	}
	defer func() { _ = rc.Close() }() // read only
	var keep bytes.Buffer
	var r io.Reader = rc
	if d.MediaType.IsIndex() || d.MediaType.IsImage() {
		r = io.TeeReader(rc, &keep)
	}
	got, size, err := v1.SHA256(r)
	if err != nil {
		return nil, fmt.Errorf("blob %s (%s): %w", d.Digest, what, err)
	}
	if got != d.Digest || size != d.Size {
		return nil, fmt.Errorf("blob %s was changed (%s): its content has digest %s and %d bytes, the reference says %s and %d", d.Digest, what, got, size, d.Digest, d.Size)
	}
	return keep.Bytes(), nil
}
