package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The committed manifests and chart name this version and image; `make
// manifests` (part of `make image`) writes a copy with the build's own. One
// mechanism for deploy/ and the chart, so they cannot disagree.
const (
	PlaceholderVersion = "v0.0.0-dev"
	PlaceholderImage   = "ghcr.io/metal-ccm/cloud-provider-equinix-metal"
)

// Stamp copies the tree from into out, replacing the placeholder image with
// image and the placeholder version with version (and, where the chart wants
// SemVer without the "v", with version minus its "v"). Go files (the test
// helpers of package deploy) are not copied: out holds manifests only.
func Stamp(from, out, version, image string) error {
	if !strings.HasPrefix(version, "v") {
		return fmt.Errorf("version %q must start with v (as git tags and hack/version.sh do)", version)
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	replacer := strings.NewReplacer(
		PlaceholderImage, image,
		PlaceholderVersion, version,
		strings.TrimPrefix(PlaceholderVersion, "v"), strings.TrimPrefix(version, "v"),
	)
	stamped := 0
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(out, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".sh") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(PlaceholderVersion)) || bytes.Contains(b, []byte(PlaceholderImage)) {
			stamped++
			b = []byte(replacer.Replace(string(b)))
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return err
	}
	if stamped == 0 {
		return fmt.Errorf("no file under %s names %s or %s: the placeholders moved", from, PlaceholderVersion, PlaceholderImage)
	}
	return nil
}
