package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildCCM compiles the binary once per test run; these tests check what a
// person sees when starting it.
func buildCCM(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ccm")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; run without -short")
	}
	bin := buildCCM(t)

	t.Run("help lists our flags beside the standard ones", func(t *testing.T) {
		out, _ := exec.Command(bin, "--help").CombinedOutput()
		for _, want := range []string{"Equinix Metal flags:", "--metal-project-id", "--metal-load-balancer", "--metal-bgp-node-selector", "--metal-policy-dir", "--cloud-config", "--leader-elect", "(env METAL_EIP_TAG)"} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("--help lacks %q", want)
			}
		}
		if bytes.Contains(out, []byte("--metal-api-key")) || bytes.Contains(out, []byte("--metal-bgp-pass")) {
			t.Error("secrets must not have flags")
		}
	})

	const key, pass = "do-not-print-this-key", "DoNotPrint123"
	cases := []struct {
		name string
		args []string
		env  []string
		file string
		want []string
	}{
		{
			name: "missing everything",
			want: []string{"apiKey is required", "projectID is required"},
		},
		{
			name: "bad values in every layer",
			args: []string{"--metal-load-balancer=metallb://metallb-system", "--metal-api-server-port=70000"},
			env:  []string{"METAL_API_KEY=" + key, "METAL_BGP_PASS=!" + pass, "METAL_LOCAL_ASN=x"},
			file: `{"projectID":"p","bgpNodeSelector":"a in b"}`,
			want: []string{"4 problems", "three slashes", "apiServerPort (flag --metal-api-server-port)", "localASN (env METAL_LOCAL_ASN)", `bgpNodeSelector (cloud-config field "bgpNodeSelector")`},
		},
		{
			name: "unreadable cloud-config",
			args: []string{"--cloud-config=/nonexistent/cloud-sa.json"},
			want: []string{"cannot read the cloud-config file", "--cloud-config"},
		},
		{
			// pflag refuses the value while parsing; the message is the
			// one Load gives for a bad value in any layer.
			name: "typed flag value that does not parse",
			args: []string{"--metal-api-qps=abc"},
			want: []string{`error: invalid configuration: apiQPS (flag --metal-api-qps): "abc" is not a number`},
		},
		{
			name: "bool flag alone",
			args: []string{"--metal-eip-health-check-use-host-ip"},
			want: []string{"apiKey is required", "projectID is required"},
		},
		{
			name: "another provider",
			args: []string{"--cloud-provider=aws"},
			want: []string{`--cloud-provider is "aws"`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				p := filepath.Join(t.TempDir(), "cloud-sa.json")
				if err := os.WriteFile(p, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--cloud-config="+p)
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("exited 0; output:\n%s", out)
			}
			text := strings.TrimSpace(string(out))
			if strings.Count(text, "\n") != 0 {
				t.Errorf("want one line, got:\n%s", text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
			if strings.Contains(text, key) || strings.Contains(text, pass) {
				t.Errorf("a secret was printed:\n%s", text)
			}
		})
	}
}

// TestDefaultsForABurst: the standard flags whose defaults the binary
// changes (docs/reference/command-line.md says why) show them in --help.
func TestDefaultsForABurst(t *testing.T) {
	cmd, err := newCCMCommand()
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"concurrent-service-syncs": "50", "kube-api-qps": "100", "kube-api-burst": "200"} {
		f := cmd.Flags().Lookup(flag)
		if f == nil {
			t.Errorf("no --%s flag", flag)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s defaults to %s, want %s", flag, f.DefValue, want)
		}
	}
}
