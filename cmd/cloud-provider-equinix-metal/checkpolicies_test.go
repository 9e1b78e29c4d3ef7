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
	// Policies that load but answer with the wrong type: every new Service
	// (every selection) would fail in the CCM.
	stringPlacement := replaceRule(t, "eip.rego", "placement := {\"facility\": input.config.facility} if {", "placement := \"da\" if { true } else := {\"facility\": input.config.facility} if {")
	stringSelection := policyDir(t, map[string]string{"bgp.rego": "package equinix.bgp\n\nselected_nodes := \"all\"\n"})
	unknownNode := policyDir(t, map[string]string{"bgp.rego": "package equinix.bgp\n\nselected_nodes contains \"node-9\"\n"})
	// A policy that denies every Service is the policy's to make.
	denyAll := policyDir(t, map[string]string{"eip.rego": "package equinix.eip\n\nplacement := {\"metro\": \"da\"}\n\ndeny contains \"no Elastic IPs here\"\n"})
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
		{"a placement that is a string", []string{"--metal-policy-dir", stringPlacement}, 1, "", `data.equinix.eip.placement = "da"; it must be {"metro": "<metro>"} or {"facility": "<facility>"}`},
		{"a selection that is a string", []string{"--metal-policy-dir", stringSelection}, 1, "", `on the BGP selection of 3 nodes`},
		{"a selection of a node that is not there", []string{"--metal-policy-dir", unknownNode}, 1, "", `selected "node-9", which is not the name of a node in input.nodes`},
		{"a placement that denies everything", []string{"--metal-policy-dir", denyAll}, 0, "keep the contract", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, append([]string{"check-policies"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", code, out, errOut, tc.code, tc.out, tc.err)
			}
		})
	}
}

// policyDir is the built-in policies with files replaced or added.
func policyDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"eip.rego", "bgp.rego", "labelselector.rego"} {
		b, err := os.ReadFile(filepath.Join("../../policies", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// replaceRule is the built-in policies with one line of one file changed.
func replaceRule(t *testing.T, file, old, replacement string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../policies", file))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("policies/%s no longer has %q", file, old)
	}
	return policyDir(t, map[string]string{file: strings.Replace(string(b), old, replacement, 1)})
}
