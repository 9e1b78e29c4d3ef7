//go:build cluster && linux

package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/mdblock"
)

// docBlock is the shell block of the repository's file path (relative to
// the repository's root) marked <!-- test/cluster: TEST ... -->.
func docBlock(t *testing.T, path, test string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := mdblock.Marked(string(b), "test/cluster")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	block, ok := blocks[test]
	if !ok {
		t.Fatalf("%s has no block marked <!-- test/cluster: %s -->", path, test)
	}
	return block
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
