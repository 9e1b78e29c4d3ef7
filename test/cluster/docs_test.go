//go:build cluster && linux

package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docBlockMarker precedes, in a Markdown file of the repository, a shell
// block that a cluster test runs as it is written.
const docBlockMarker = "<!-- test/cluster"

// docBlock is the shell block that follows the marker naming test in the
// repository's file path (relative to the repository's root).
func docBlock(t *testing.T, path, test string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(b), docBlockMarker)[1:] {
		head, rest, _ := strings.Cut(part, "\n")
		if !strings.Contains(head, "("+test+")") {
			continue
		}
		body, ok := strings.CutPrefix(rest, "```sh\n")
		if !ok {
			t.Fatalf("%s: the block marked for %s is not a ```sh block right after the marker", path, test)
		}
		body, _, ok = strings.Cut(body, "```")
		if !ok {
			t.Fatalf("%s: the block marked for %s does not end", path, test)
		}
		return body
	}
	t.Fatalf("%s has no block marked %q (%s)", path, docBlockMarker, test)
	return ""
}

// runDocBlock runs a documented block with bash (errexit, pipefail), kubectl
// on the PATH and the cluster's admin kubeconfig, as a user would paste
// it, and returns what it printed.
func runDocBlock(t *testing.T, c *Cluster, path, test string) string {
	t.Helper()
	block := docBlock(t, path, test)
	kubectl, err := findKubectl()
	if err != nil {
		t.Fatalf("no kubectl to run %s's block: %v (make cluster-test builds it)", path, err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s's block, as written, failed: %v\n%s", path, err, out)
	}
	return string(out)
}

// metricsByHand runs docs/metrics.md's commands that read the leader's
// metrics, after the stage table's burst: the module's syncs are there,
// successful, with the time of their writes.
func metricsByHand(t *testing.T, c *Cluster) {
	t.Helper()
	out := runDocBlock(t, c, "docs/metrics.md", "TestCloudTraffic")
	for _, want := range []string{
		`equinix_metal_lbmodule_syncs_total{result="success"}`,
		`equinix_metal_lbmodule_sync_phase_duration_seconds_count{phase="write"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("docs/metrics.md's commands printed no %s:\n%s", want, out)
		}
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "_sum{") || strings.Contains(l, "syncs_total") {
			lines = append(lines, l)
		}
	}
	t.Logf("docs/metrics.md's commands read the leader's metrics:\n%s", strings.Join(lines, "\n"))
}
