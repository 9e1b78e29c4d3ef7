package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushSigned pushes a signed layout as make image-push does, to a
// registry with the referrers API: the index under the version, the SBOM
// listed as its referrer, both signatures under cosign's tags, each the
// same bytes as in the layout.
func TestPushSigned(t *testing.T) {
	sv, _ := testKeys(t)
	dir := testLayout(t, "pushed", testSBOMs(t))
	if _, err := Sign(dir, testRepo, sv); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/team/cloud-provider-equinix-metal"
	if err := runPush([]string{"--layout", dir, "--ref", repo + ":" + testMeta.Version}); err != nil {
		t.Fatal(err)
	}

	l := readLayout(t, dir)
	r, err := name.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	if desc, err := remote.Head(r.Tag(testMeta.Version)); err != nil || desc.Digest != l.Index.Digest {
		t.Errorf("%s:%s is %v (%v), want the layout's index %s", repo, testMeta.Version, desc, err, l.Index.Digest)
	}
	sbom, _ := l.SBOM()
	refs, err := remote.Referrers(r.Digest(l.Index.Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	im, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// (go-containerregistry's test registry reports a referrer's
	// artifactType from its config's media type only; the distribution
	// spec takes the manifest's artifactType first: the pushed manifest has
	// it, checked below.)
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != sbom.Digest {
		t.Errorf("referrers of the index: %+v, want the SBOM %s", im.Manifests, sbom.Digest)
	}
	if got, err := remote.Image(r.Digest(sbom.Digest.String())); err != nil {
		t.Error(err)
	} else if m, err := got.Manifest(); err != nil || m.ArtifactType != SBOMArtifactType || m.Subject == nil || m.Subject.Digest != l.Index.Digest {
		t.Errorf("the pushed SBOM manifest %+v (%v): want artifactType %s, subject %s", m, err, SBOMArtifactType, l.Index.Digest)
	}
	for _, d := range []v1.Hash{l.Index.Digest, sbom.Digest} {
		tag := SignatureTag(d)
		want, _ := l.find(tag)
		if desc, err := remote.Head(r.Tag(tag)); err != nil || desc.Digest != want.Digest {
			t.Errorf("%s:%s is %v (%v), want the layout's signature %s", repo, tag, desc, err, want.Digest)
		}
	}
}
