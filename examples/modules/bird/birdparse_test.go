package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// TestBIRDParses hands every golden case's configuration, laid out as the
// ConfigMap mount lays it out, to the real BIRD parser (bird -p), which
// checks syntax and symbols without starting any protocol. It needs the
// bird binary (Debian: apt-get install bird2); without it the test says so
// and stops, since the golden files still pin the exact text.
func TestBIRDParses(t *testing.T) {
	bird, err := exec.LookPath("bird")
	if err != nil {
		t.Skip("the bird binary is not installed (apt-get install bird2); the configuration was not checked by BIRD's parser")
	}
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			resp, err := generate(withOptions(c))
			if err != nil {
				t.Fatal(err)
			}
			birdParse(t, bird, configMapData(t, resp))
		})
	}
}

// birdParse writes a ConfigMap's data into a directory, as the volume mount
// does, and runs bird -p on each node file and on the shared file.
func birdParse(t *testing.T, bird string, data map[string]string) {
	t.Helper()
	dir := t.TempDir()
	var nodes []string
	for key, conf := range data {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if key != ServicesKey {
			nodes = append(nodes, key)
		}
	}
	sort.Strings(nodes)
	// The shared file alone must parse too (with a router id, which BIRD
	// needs and only a node file gives).
	wrapper := filepath.Join(dir, "wrapper.conf.test")
	if err := os.WriteFile(wrapper, []byte("router id 192.0.2.1;\ninclude \""+ServicesKey+"\";\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Run from another directory: BIRD must find the include next to the
	// node file, as it will in the mounted volume.
	for _, f := range append(nodes, filepath.Base(wrapper)) {
		cmd := exec.Command(bird, "-p", "-c", filepath.Join(dir, f))
		cmd.Dir = t.TempDir()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bird -p -c %s: %v\n%s\n--- %s:\n%s", f, err, out, f, data[f])
		}
	}
}
