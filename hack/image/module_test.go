package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/ociregistry"
)

// moduleOutput runs `image module` (make module-image) and returns what it
// printed.
func moduleOutput(t *testing.T, args ...string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	runErr := runModule(args)
	os.Stdout = stdout
	_ = w.Close()
	out, _ := io.ReadAll(r)
	if runErr != nil {
		t.Fatalf("image module %s: %v\n%s", strings.Join(args, " "), runErr, out)
	}
	return string(out)
}

// TestModuleOutput: what `make module-image` prints is what goes in the
// configuration: a complete loadbalancer line (the ?namespace= the module's
// objects go to: MODULE_NAMESPACE, or a placeholder that says so) pinned by
// the manifest digest, and one statement of which of the two sha256 numbers
// (the artifact's manifest, the .wasm file) goes in the URL.
func TestModuleOutput(t *testing.T) {
	dir := t.TempDir()
	wasm := append([]byte("\x00asm\x01\x00\x00\x00"), "a module"...)
	path := filepath.Join(dir, "mine.wasm")
	if err := os.WriteFile(path, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	fileSum := hex.EncodeToString(sum[:])
	host, _ := ociregistry.Start(t)
	out := filepath.Join(dir, "layout")

	for _, tc := range []struct {
		args      []string
		namespace string
	}{
		{nil, "<namespace>"},
		{[]string{"--namespace", "bird"}, "bird"},
	} {
		printed := moduleOutput(t, append([]string{"--wasm", path, "--out", out, "--ref", host + "/team/mine:v1"}, tc.args...)...)
		idx, err := layout.ImageIndexFromPath(out)
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil || len(m.Manifests) != 1 {
			t.Fatalf("the layout's index: %v, %v", m, err)
		}
		manifest := m.Manifests[0].Digest.String()

		want := "loadbalancer: wasm+oci://" + host + "/team/mine@" + manifest + "?namespace=" + tc.namespace
		var lbLines, digestStatements int
		for _, line := range strings.Split(printed, "\n") {
			if strings.HasPrefix(line, "loadbalancer:") {
				lbLines++
				if line != want {
					t.Errorf("printed %q\nwant      %q", line, want)
				}
				if _, err := config.ParseLoadBalancer(strings.TrimPrefix(line, "loadbalancer: ")); err != nil {
					t.Errorf("the printed URL: %v", err)
				}
				continue
			}
			if strings.Contains(line, manifest) && strings.Contains(line, "URL") {
				digestStatements++
			}
			if strings.Contains(line, fileSum) && !strings.Contains(line, "wasm:///") {
				t.Errorf("the file's sha256 printed without saying it is only for wasm:/// files: %q", line)
			}
		}
		if lbLines != 1 || digestStatements != 1 {
			t.Errorf("printed %d loadbalancer lines and %d statements naming the manifest digest as the URL's; want 1 and 1:\n%s", lbLines, digestStatements, printed)
		}
		if tc.namespace == "<namespace>" && !strings.Contains(printed, "MODULE_NAMESPACE") {
			t.Errorf("the placeholder <namespace> is not explained (MODULE_NAMESPACE=):\n%s", printed)
		}
	}
}
