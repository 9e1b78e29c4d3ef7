package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGoldenWasm builds this package for wasip1 (sdktest.Build runs
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared, as a user would),
// runs the .wasm in the CCM's own loader (verification, sandbox, limits,
// output validation) and compares the output with testdata/<case>.json.
// Each configuration file is also written out as testdata/<case>/<key> so a
// reviewer reads BIRD syntax instead of escaped JSON; those are compared too.
// It also checks that the Wasm output equals the native handler's, byte
// for byte: the unit tests, which run natively, then speak for the .wasm.
func TestGoldenWasm(t *testing.T) {
	wasm := sdktest.Build(t, ".")
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			resp, err := sdktest.Generate(t, wasm, c.options(), c.req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			native, err := handle(t, c.options(), c.req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, native) {
				t.Errorf("Wasm output differs from the native handler's:\nwasm:   %s\nnative: %s", got, native)
			}

			var pretty bytes.Buffer
			if err := json.Indent(&pretty, got, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			files := map[string][]byte{c.name + ".json": pretty.Bytes()}
			data := configMapData(t, resp)
			for key, conf := range data {
				files[filepath.Join(c.name, key)] = []byte(conf)
			}
			compareGolden(t, c.name, files)
		})
	}
}

// compareGolden checks files (paths under testdata/) against the golden
// copies, or rewrites them all with -update, removing stale ones in
// testdata/<dir>/.
func compareGolden(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if *update {
		if err := os.RemoveAll(filepath.Join("testdata", dir)); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			p := filepath.Join("testdata", name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Errorf("%v; run go test -update to create it", err)
			continue
		}
		if !bytes.Equal(files[name], want) {
			t.Errorf("testdata/%s differs (go test -update rewrites it); got:\n%s", name, files[name])
		}
	}
	// A golden file the module no longer produces is stale.
	entries, err := os.ReadDir(filepath.Join("testdata", dir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[filepath.Join(dir, e.Name())]; !ok {
			t.Errorf("testdata/%s/%s is not produced any more; go test -update removes it", dir, e.Name())
		}
	}
}
