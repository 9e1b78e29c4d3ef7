// Package ociregistry is test machinery for modules delivered by digest: an
// in-process OCI registry (go-containerregistry's pkg/registry) on loopback,
// and a push that answers with the reference pinned by digest, as a user
// would write it after `make module-image`.
package ociregistry

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Start serves an empty registry until the test ends (or stop is called,
// for a test of an unreachable registry) and returns its host (host:port,
// plain HTTP on loopback).
func Start(t testing.TB) (host string, stop func()) {
	t.Helper()
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close) // Close is idempotent
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close
}

// Push writes img to repo on the registry at host (tagged v1) and returns
// the reference pinned by digest: host/repo@sha256:….
func Push(t testing.TB, host, repo string, img v1.Image) string {
	t.Helper()
	tag, err := name.NewTag(host + "/" + repo + ":v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return host + "/" + repo + "@" + d.String()
}
