package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckPolicies: check-policies loads a directory as the CCM does,
// offline, and refuses with the CCM's own message what the CCM would
// refuse, including a missing decision rule that opa check accepts.
func TestCheckPolicies(t *testing.T) {
	builtin, err := os.ReadFile("../../policies/eip.rego")
	if err != nil {
		t.Fatal(err)
	}
	missingRule := t.TempDir()
	// A valid module in the placement package without the rule the CCM
	// queries: `opa check --strict` passes it.
	if err := os.WriteFile(filepath.Join(missingRule, "eip.rego"), []byte("package equinix.eip\n\nfoo := 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What examples/policies says to mount: the defaults, with bgp.rego
	// replaced by the example's.
	example := t.TempDir()
	for _, f := range []string{"../../policies/eip.rego", "../../policies/labelselector.rego", "../../examples/policies/bgp-no-control-plane/bgp.rego"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(example, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	disabled := t.TempDir()
	if err := os.WriteFile(filepath.Join(disabled, "eip.rego"), append(builtin, "\nnow := time.now_ns()\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{"the built-in policies", []string{"--metal-policy-dir", "../../policies"}, 0, "policies in ../../policies: the CCM would load them (digest ", ""},
		{"an example mounted with the defaults", []string{"--metal-policy-dir", example}, 0, "the CCM would load them", ""},
		{"an example without what it imports", []string{"--metal-policy-dir", "../../examples/policies/bgp-no-control-plane"}, 1, "", "undefined function data.equinix.labelselector.selected"},
		{"no directory", nil, 1, "", "error: --metal-policy-dir is required"},
		{"a directory that is not there", []string{"--metal-policy-dir", filepath.Join(missingRule, "nope")}, 1, "", "cannot be read"},
		{"a missing decision rule", []string{"--metal-policy-dir", missingRule}, 1, "", "define no rule data.equinix.eip.placement"},
		{"a disabled builtin", []string{"--metal-policy-dir", disabled}, 1, "", "time.now_ns"},
		{"a stray argument", []string{"../../policies"}, 1, "", "takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, append([]string{"check-policies"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", code, out, errOut, tc.code, tc.out, tc.err)
			}
		})
	}
}
