package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// repoRoot is where the Makefile is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// readmeRegistry is the REGISTRY of the README's install commands;
// TestReadmeInstallCommands keeps the two equal.
const readmeRegistry = "registry.example/team"

// readmeInstall returns the shell commands of the README's "## Install"
// section, continuation lines joined.
func readmeInstall(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Install\n")
	if !ok {
		t.Fatal("README has no ## Install section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var cmds []string
	in := false
	for _, line := range strings.Split(strings.ReplaceAll(sec, "\\\n", " "), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in
		case in && strings.TrimSpace(line) != "":
			cmd, _, _ := strings.Cut(line, " #")
			cmds = append(cmds, strings.Join(strings.Fields(cmd), " "))
		}
	}
	return cmds
}

func commandWith(t *testing.T, cmds []string, prefix string) []string {
	t.Helper()
	for _, c := range cmds {
		if strings.HasPrefix(c, prefix) {
			return strings.Fields(c)
		}
	}
	t.Fatalf("README's install section has no %q command in %q", prefix, cmds)
	return nil
}

// TestReadmeInstallCommands: the README builds and pushes with one REGISTRY,
// the one TestMakeImage builds with.
func TestReadmeInstallCommands(t *testing.T) {
	cmds := readmeInstall(t)
	for _, prefix := range []string{"make image ", "make image-push "} {
		args := commandWith(t, cmds, prefix)
		if !contains(args, "REGISTRY="+readmeRegistry) {
			t.Errorf("README: %s does not use REGISTRY=%s", strings.Join(args, " "), readmeRegistry)
		}
	}
	commandWith(t, cmds, "helm install ")
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

var shellVar = regexp.MustCompile(`^"?\$\{?([A-Z_]+)\}?"?$`)

// checkReadmeInstall renders the chart the README's `helm install` names
// (in the bin directory make image wrote), with its --namespace and --set
// values, checks the Deployment runs the image just built, and sends every
// object to a real kube-apiserver as a server-side dry run.
func checkReadmeInstall(t *testing.T, deployDir, version string) {
	args := commandWith(t, readmeInstall(t), "helm install ")
	if len(args) < 4 {
		t.Fatalf("README: %v", args)
	}
	chartDir, ok := strings.CutPrefix(args[3], "bin/deploy/")
	if !ok {
		t.Fatalf("README installs %s, not the chart make image stamped (bin/deploy/chart)", args[3])
	}
	ns := "default"
	values := map[string]any{}
	for i := 4; i < len(args); i++ {
		switch args[i] {
		case "--namespace", "-n":
			i++
			ns = args[i]
		case "--set":
			i++
			k, v, _ := strings.Cut(args[i], "=")
			if m := shellVar.FindStringSubmatch(v); m != nil {
				v = "test-value-of-" + m[1] // what the reader's shell puts there
			}
			if err := strvals.ParseInto(k+"="+v, values); err != nil {
				t.Fatalf("README: --set %s: %v", args[i], err)
			}
		default:
			t.Fatalf("README's helm install has %q, which this test does not understand", args[i])
		}
	}
	ch, err := deploycheck.LoadChart(filepath.Join(deployDir, chartDir))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.AppVersion != version || "v"+ch.Metadata.Version != version {
		t.Errorf("stamped chart: version %s, appVersion %s; want %s", ch.Metadata.Version, ch.Metadata.AppVersion, version)
	}
	objs, err := deploycheck.RenderChart(ch, values, ns)
	if err != nil {
		t.Fatal(err)
	}
	var image string
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			image, _ = cs[0].(map[string]any)["image"].(string)
		}
	}
	if want := readmeRegistry + "/cloud-provider-equinix-metal:" + version; image != want {
		t.Errorf("the README's install runs %q, want the image just built, %q", image, want)
	}
	env := testenv.New(t)
	if _, err := deploycheck.DryRun(context.Background(), env.Config, objs); err != nil {
		t.Fatal(err)
	}
}

// checkStamped: bin/deploy names the build's version and image, nowhere
// the placeholder or :latest.
func checkStamped(t *testing.T, dir, version, image string) {
	var kust struct {
		Images []struct{ NewName, NewTag string } `json:"images"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "base", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &kust); err != nil {
		t.Fatal(err)
	}
	if len(kust.Images) != 1 || kust.Images[0].NewName != image || kust.Images[0].NewTag != version {
		t.Errorf("bin/deploy/base/kustomization.yaml images = %+v, want %s:%s", kust.Images, image, version)
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		// A dev build's version (v0.0.0-dev.g<sha>) starts with the
		// placeholder: look for the placeholder outside the stamped version.
		rest := strings.ReplaceAll(string(b), version, "")
		if strings.Contains(rest, PlaceholderVersion) || strings.Contains(rest, ":latest") {
			t.Errorf("%s still names %s or :latest", p, PlaceholderVersion)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
