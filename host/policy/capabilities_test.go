package policy

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

var update = flag.Bool("update", false, "rewrite the OPA capabilities file at the repository root")

// capabilitiesPath is the file users and `make policy-test` give to
// `opa check --capabilities`.
var capabilitiesPath = filepath.Join("..", "..", capabilitiesFile)

// TestCapabilitiesFile: the shipped capabilities file is exactly what the
// CCM compiles policies with, so `opa check --capabilities` refuses what the
// CCM refuses. After upgrading OPA or changing the sandbox, run
// go test ./host/policy -run TestCapabilitiesFile -update.
func TestCapabilitiesFile(t *testing.T) {
	want, err := json.MarshalIndent(capabilities, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(capabilitiesPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(capabilitiesPath)
	if err != nil {
		t.Fatalf("%v; run go test ./host/policy -run TestCapabilitiesFile -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the capabilities the CCM compiles with; run go test ./host/policy -run TestCapabilitiesFile -update", capabilitiesFile)
	}

	// And OPA reads it as the same set of builtins: none of the disabled
	// ones, every other one.
	caps, err := ast.LoadCapabilitiesFile(capabilitiesPath)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range caps.Builtins {
		names = append(names, b.Name)
	}
	if len(removedBuiltins) == 0 {
		t.Fatal("no builtin is disabled; the sandbox is gone")
	}
	for _, name := range removedBuiltins {
		if slices.Contains(names, name) {
			t.Errorf("the file allows %s, which the CCM disables", name)
		}
	}
	for _, b := range capabilities.Builtins {
		if !slices.Contains(names, b.Name) {
			t.Errorf("the file lacks %s, which the CCM allows", b.Name)
		}
	}
	for _, name := range []string{"http.send", "time.now_ns", "rand.intn", "net.lookup_ip_addr", "uuid.rfc4122", "opa.runtime"} {
		if !slices.Contains(removedBuiltins, name) {
			t.Errorf("%s is not disabled, but policies/README.md says it is", name)
		}
	}
}
