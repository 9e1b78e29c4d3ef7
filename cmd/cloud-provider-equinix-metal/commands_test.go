package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runCmd runs one command line through the binary's command tree.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// twoContexts writes a kubeconfig with the contexts a (current) and b, for
// clusters at different addresses.
func twoContexts(t *testing.T) string {
	t.Helper()
	const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u}
current-context: a
`
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noInCluster keeps client-go from falling back to the in-cluster config
// when these tests run in a pod.
func noInCluster(t *testing.T) {
	t.Helper()
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

// TestSubcommandHelp: plan and cleanup are subcommands of the one command,
// so `help plan` and `plan --help` describe them with their own flags,
// and nothing of the standard command's flags.
func TestSubcommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{
			args: []string{"help", "plan"},
			want: []string{"Usage:\n  cloud-provider-equinix-metal plan ", "Exit code: 0 nothing to change",
				"--kubeconfig string", "--context string", "--cloud-config string", "--cloud-config-secret string", "-o, --output string",
				"Equinix Metal flags:", "--metal-project-id string", "--metal-api-qps float", "-v, --v Level"},
			// --namespace would do nothing: plan reads every namespace.
			notWant: []string{"--namespace", "--leader-elect", "--cloud-provider", "--log-flush-frequency", "--server"},
		},
		{
			args: []string{"plan", "--help"},
			want: []string{"Usage:\n  cloud-provider-equinix-metal plan ", "--kubeconfig string", "--context string", "--metal-api-qps float"},
		},
		{
			args: []string{"help", "cleanup"},
			want: []string{"Usage:\n  cloud-provider-equinix-metal cleanup --cluster-uid UID", "--cluster-uid string", "--yes", "--cloud-config string", "--metal-api-retries int"},
			// The cluster is gone: cleanup talks to Equinix Metal only.
			notWant: []string{"--kubeconfig", "--context", "--namespace", "--leader-elect"},
		},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q lacks %q:\n%s", tc.args, w, out)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%q shows %q, which is not this subcommand's:\n%s", tc.args, w, out)
			}
		}
	}
}

// TestMetalFlagTypesInHelp: the standard command's --help shows each
// --metal-* flag with its type.
func TestMetalFlagTypesInHelp(t *testing.T) {
	code, out, _ := runCmd(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	fields := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "--metal-") {
			fields[f[0]] = f[1:]
		}
	}
	for flag, typ := range map[string]string{
		"--metal-api-retries":       "int",
		"--metal-module-timeout":    "duration",
		"--metal-orphan-eip-grace":  "duration",
		"--metal-api-qps":           "float",
		"--metal-local-asn":         "uint32",
		"--metal-load-balancer":     "string",
		"--metal-annotate-bgp-pass": "", // a bool takes no value: its usage follows
	} {
		f, ok := fields[flag]
		switch {
		case !ok:
			t.Errorf("--help lacks %s", flag)
		case typ == "" && f[0] != "write":
			t.Errorf("%s shows a value type %q; a bool flag takes none", flag, f[0])
		case typ != "" && f[0] != typ:
			t.Errorf("%s shows type %q, want %q", flag, f[0], typ)
		}
	}
	if !strings.Contains(out, "(default 20)") || strings.Contains(out, `(default "20")`) {
		t.Error(`--metal-api-qps's default must show as 20, not "20"`)
	}
}

// TestPlanContext: --context picks the context of the kubeconfig that
// --kubeconfig (or KUBECONFIG) names; without it, the current-context.
func TestPlanContext(t *testing.T) {
	path := twoContexts(t)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     string // KUBECONFIG
		args    []string
		host    string
		wantErr string
	}{
		{name: "current-context", args: []string{"--kubeconfig", path}, host: "https://a.example:6443"},
		{name: "--context", args: []string{"--kubeconfig", path, "--context", "b"}, host: "https://b.example:6443"},
		{name: "--context=", args: []string{"--kubeconfig=" + path, "--context=a"}, host: "https://a.example:6443"},
		{name: "KUBECONFIG", env: path, args: []string{"--context", "b"}, host: "https://b.example:6443"},
		{name: "unknown context", args: []string{"--kubeconfig", path, "--context", "c"}, wantErr: `no context "c" in it; pass --context with one of a, b`},
		// No localhost:8080 fallback: a kubeconfig without a cluster says what to pass.
		{name: "nothing configured", args: []string{"--kubeconfig", empty}, wantErr: "pass --kubeconfig or set KUBECONFIG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			noInCluster(t)
			exit := 0
			cmd, o := newPlanCommand(&exit)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := kubeConfig(o.kube)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host {
				t.Errorf("host %s, want %s", cfg.Host, tc.host)
			}
		})
	}

	// Through the command line: the context is looked up before anything
	// is read, and a missing one is one line.
	code, _, errOut := runCmd(t, "plan", "--kubeconfig", path, "--context", "c")
	if code != 1 || !strings.Contains(errOut, `no context "c" in it; pass --context with one of a, b`) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("plan --context c: exit %d, stderr %q; want exit 1 and one line naming the context", code, errOut)
	}
}

// TestCompletion: cobra's completion command exists, and what it asks
// the binary for (__complete) lists the subcommands and their flags.
func TestCompletion(t *testing.T) {
	code, out, errOut := runCmd(t, "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_cloud-provider-equinix-metal") {
		t.Fatalf("completion bash: exit %d, stderr %q, script:\n%s", code, errOut, out)
	}

	path := twoContexts(t)
	for _, tc := range []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{args: []string{""}, want: []string{"plan", "cleanup", "completion", "help"}},
		{args: []string{"pl"}, want: []string{"plan"}, notWant: []string{"cleanup"}},
		{args: []string{"help", ""}, want: []string{"plan", "cleanup"}},
		{
			args:    []string{"plan", "--"},
			want:    []string{"--kubeconfig", "--context", "--cloud-config", "--cloud-config-secret", "--output", "--metal-api-qps", "--v"},
			notWant: []string{"--namespace", "--leader-elect", "--log-flush-frequency"},
		},
		{args: []string{"cleanup", "--"}, want: []string{"--cluster-uid", "--yes", "--metal-api-qps"}, notWant: []string{"--kubeconfig", "--context"}},
		{args: []string{"plan", "--kubeconfig", path, "--context", ""}, want: []string{"a", "b"}},
		{args: []string{"plan", "-o", ""}, want: []string{"text", "json"}},
	} {
		code, out, errOut := runCmd(t, append([]string{cobra.ShellCompRequestCmd}, tc.args...)...)
		if code != 0 {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, errOut)
		}
		got := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			name, _, _ := strings.Cut(line, "\t")
			got[name] = true
		}
		for _, w := range tc.want {
			if !got[w] {
				t.Errorf("completing %q does not offer %q:\n%s", tc.args, w, out)
			}
		}
		for _, w := range tc.notWant {
			if got[w] {
				t.Errorf("completing %q offers %q:\n%s", tc.args, w, out)
			}
		}
	}
}

// TestSubcommandFlagErrors: every problem with a subcommand's command line
// is one line and exit code 1; a --metal-* value that does not parse is
// worded as any other configuration error, naming the option, the flag
// and what a valid value looks like.
func TestSubcommandFlagErrors(t *testing.T) {
	noInCluster(t)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--metal-api-qps=abc"}, `error: invalid configuration: apiQPS (flag --metal-api-qps): "abc" is not a number`},
		{[]string{"plan", "--metal-module-timeout", "5"}, `error: invalid configuration: moduleTimeout (flag --metal-module-timeout): "5" is not a duration; use a number with a unit, for example 500ms, 2s or 5m`},
		{[]string{"cleanup", "--metal-annotate-bgp-pass=maybe"}, `error: invalid configuration: annotateBGPPass (flag --metal-annotate-bgp-pass): "maybe" is not a boolean; use true or false`},
		{[]string{"cleanup", "--metal-api-retries=x", "--cluster-uid", "u"}, `error: invalid configuration: apiRetries (flag --metal-api-retries): "x" is not a whole number`},
		// A bool flag alone is true: the command line parses, and plan
		// goes on to the kubeconfig.
		{[]string{"plan", "--metal-eip-health-check-use-host-ip", "--kubeconfig", empty}, "error: loading the kubeconfig"},
		// The standard command's flags are not the subcommands'.
		{[]string{"plan", "--leader-elect"}, "error: unknown flag: --leader-elect"},
		{[]string{"plan", "--namespace", "x"}, "error: unknown flag: --namespace"},
		{[]string{"cleanup", "--kubeconfig", "x"}, "error: unknown flag: --kubeconfig"},
		{[]string{"plan", "extra"}, `error: plan takes no arguments, got ["extra"]`},
		{[]string{"cleanup", "--yes", "false"}, `error: cleanup takes no arguments, got ["false"]`},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and one line starting %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
