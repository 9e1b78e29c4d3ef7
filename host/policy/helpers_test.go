package policy

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/metal-ccm/cloud-provider-equinix-metal/policies"
)

// defaultFiles are the built-in policy files (tests excluded), by name: the
// starting point of every custom policy directory, as in the README.
func defaultFiles(t testing.TB) map[string]string {
	t.Helper()
	files := map[string]string{}
	entries, err := fs.ReadDir(policies.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if isPolicyFile(e.Name()) {
			b, err := fs.ReadFile(policies.FS, e.Name())
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(b)
		}
	}
	return files
}

// with returns the default files with some replaced or added; a value of
// "" removes the file.
func with(t testing.TB, changes map[string]string) map[string]string {
	files := defaultFiles(t)
	for name, content := range changes {
		if content == "" {
			delete(files, name)
			continue
		}
		files[name] = content
	}
	return files
}

// plainDir writes files into a new temporary directory.
func plainDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// configMapDir lays files out as the kubelet mounts a ConfigMap: the data
// in a hidden timestamped directory, a "..data" symlink to it, and one
// symlink per key into "..data". update swaps "..data" atomically, as the
// kubelet's AtomicWriter does, so tests see the real event sequence.
type configMapDir struct {
	t    testing.TB
	dir  string
	gen  int
	keys map[string]bool
}

func newConfigMapDir(t testing.TB, files map[string]string) *configMapDir {
	c := &configMapDir{t: t, dir: t.TempDir(), keys: map[string]bool{}}
	c.update(files)
	return c
}

func (c *configMapDir) update(files map[string]string) {
	t := c.t
	t.Helper()
	c.gen++
	ts := fmt.Sprintf("..2026_11_21_05_00_%02d.%d", c.gen, c.gen)
	for name, content := range files {
		p := filepath.Join(c.dir, ts, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(c.dir, "..data"))
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if !c.keys[name] {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(c.dir, name)); err != nil {
				t.Fatal(err)
			}
			c.keys[name] = true
		}
	}
	for name := range c.keys {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(c.dir, name)); err != nil {
				t.Fatal(err)
			}
			delete(c.keys, name)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(c.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// ParseSelector parses a bgpNodeSelector setting with the Kubernetes
// label-selector parser into the requirements a selection policy gets. An
// empty setting has no requirements (every node). The CCM gets the setting
// parsed (config.Config.NodeSelector) and calls SelectorRequirements.
func ParseSelector(s string) ([]Requirement, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("bgpNodeSelector %q is not a label selector (%v); use for example key1=value1,key2 in (a,b),!key3", s, err)
	}
	return SelectorRequirements(sel), nil
}

func mustLoad(t testing.TB, dir string, opts Options) *Engine {
	t.Helper()
	e, err := Load(context.Background(), dir, opts)
	if err != nil {
		t.Fatalf("Load(%q): %v", dir, err)
	}
	return e
}

// defaultConfig is the placement config with the default annotation names.
var defaultConfig = PlacementConfig{
	AnnotationEIPMetro:    "metal.equinix.com/eip-metro",
	AnnotationEIPFacility: "metal.equinix.com/eip-facility",
}

func serviceWith(annotations map[string]string) Service {
	return Service{Namespace: "shop", Name: "web", Annotations: annotations}
}

// checkOneLine fails when an error message a user may see spans lines.
func checkOneLine(t testing.TB, err error) {
	t.Helper()
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Errorf("error message is not one line: %q", err)
	}
}
