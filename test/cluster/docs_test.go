//go:build cluster && linux

package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
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
// on the PATH and the cluster's admin kubeconfig, from the repository's
// root, as a user would paste it, and returns what it printed.
func runDocBlock(t *testing.T, c *Cluster, path, test string) string {
	t.Helper()
	return runDocBlockWith(t, c, path, test, nil)
}

// placeholder is a <word> a block's reader replaces with their own value.
var placeholder = regexp.MustCompile(`<[a-z][a-z0-9-]*>`)

// runDocBlockWith is runDocBlock with the block's <placeholders> filled in
// as a user would, from fill; a placeholder fill lacks fails the test. It
// runs from the repository's root, where a user runs make.
func runDocBlockWith(t *testing.T, c *Cluster, path, test string, fill map[string]string) string {
	t.Helper()
	return runDocBlockIn(t, c, filepath.Join("..", ".."), path, test, fill)
}

// runDocBlockIn is runDocBlockWith run in dir instead of the repository's
// root.
func runDocBlockIn(t *testing.T, c *Cluster, dir, path, test string, fill map[string]string) string {
	t.Helper()
	block := docBlock(t, path, test)
	for k, v := range fill {
		block = strings.ReplaceAll(block, k, v)
	}
	if p := placeholder.FindString(block); p != "" {
		t.Fatalf("%s's block %s has the placeholder %s, which the test does not fill", path, test, p)
	}
	kubectl, err := findKubectl()
	if err != nil {
		t.Fatalf("no kubectl to run %s's block: %v (make cluster-test builds it)", path, err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
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

// firstLook runs docs/troubleshooting.md's first block, the commands a
// user starts with, on a Service of the cluster and a node: every
// replica's log, the Service's Events and address, the node's provider
// ID, the module's failures (none) and the MetalLB objects it wrote.
func firstLook(t *testing.T, c *Cluster, service, ip string) {
	t.Helper()
	out := runDocBlockWith(t, c, "docs/troubleshooting.md", "TestCloudTraffic/first-look",
		map[string]string{"<service>": service, "<node>": c.Nodes[0].Name})
	pods := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "[pod/"); ok {
			if name, _, ok := strings.Cut(rest, "/"); ok {
				pods[name] = true
			}
		}
	}
	for _, want := range []string{"LoadBalancer Ingress:", ip, "equinixmetal://", "No resources found", "ipaddresspool.metallb.io/", "bgppeer.metallb.io/", "bgpadvertisement.metallb.io/"} {
		if !strings.Contains(out, want) {
			t.Errorf("docs/troubleshooting.md's first block printed no %q:\n%s", want, out)
		}
	}
	if len(pods) < 2 {
		t.Errorf("docs/troubleshooting.md's first block showed the log of %v, want every replica's", pods)
	}
	t.Logf("docs/troubleshooting.md's first block: the logs of %d replicas, %s's Events and address, the node's provider ID, the module's objects", len(pods), service)
}

// readinessByHand runs docs/troubleshooting.md's readiness block while
// Equinix's API has not answered for longer than the check's 30 s. The
// check fails only once the leader's calls have failed for 30 s: with a
// Service created during the outage (churnDuringEvents, make
// cluster-test) they have, and the leader's verdict must name the failing
// check and its own path the reason; in make ci, which creates none, the
// leader may have had no call to make, and the block must answer in the
// documented form.
func readinessByHand(t *testing.T, c *Cluster) {
	t.Helper()
	out := runDocBlock(t, c, "docs/troubleshooting.md", "TestCloudTraffic/readiness")
	wants := []string{"equinix-api", "[+]module ok", "[+]policies ok", "[+]caches ok", "readyz check"}
	if churnDuringEvents() {
		wants = append(wants, "[-]equinix-api failed: reason withheld", "readyz check failed", "the Equinix Metal API has not answered since")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("docs/troubleshooting.md's readiness block, with Equinix's API down, printed no %q:\n%s", want, out)
		}
	}
	t.Logf("docs/troubleshooting.md's readiness block, with Equinix's API down:\n%s", linesWith(out, "equinix-api", "readyz", "not answered"))
}

// checkTakeOverByHand runs the migration guide's "Check that the take-over
// worked" blocks after a switch: the replicas' logs name the mode chosen
// and no failed sync, every Service keeps its address (addrs: name to
// address, in the default namespace), every pool of those Services
// carries the CCM's owner label and is listed by an advertisement, and the
// leader's readiness check of the module answers ok.
func checkTakeOverByHand(t *testing.T, c *Cluster, addrs map[string]string) {
	t.Helper()
	out := runDocBlock(t, c, migrationGuideDoc, "TestCloudTakeOver/check")
	if !strings.Contains(out, "MetalLB mode chosen") {
		t.Errorf("the guide's check printed no \"MetalLB mode chosen\" from the replicas' logs:\n%s", out)
	}
	if failed := linesWith(out, "Load-balancer config sync failed"); failed != "" {
		t.Errorf("the guide's check shows failed syncs after the take-over:\n%s", failed)
	}
	for name, ip := range addrs {
		if f := rowOf(out, metav1.NamespaceDefault, name); !slices.Equal(f, []string{metav1.NamespaceDefault, name, ip}) {
			t.Errorf("the guide's check lists Service %s as %v, want its address %s", name, f, ip)
		}
		pool := "ipaddresspool.metallb.io/" + metav1.NamespaceDefault + "." + name
		if f := rowOf(out, pool); len(f) == 0 || f[len(f)-1] != sdk.OwnedValue {
			t.Errorf("the guide's check lists pool %s as %v, want it labelled %s=%s", pool, f, sdk.OwnedLabel, sdk.OwnedValue)
		}
		if !regexp.MustCompile(`(?m)^\S+: \[.*"` + regexp.QuoteMeta(metav1.NamespaceDefault+"."+name) + `".*\]$`).MatchString(out) {
			t.Errorf("the guide's check shows no advertisement listing the pool of %s:\n%s", name, out)
		}
	}
	if ready := strings.TrimSpace(runDocBlock(t, c, migrationGuideDoc, "TestCloudTakeOver/ready")); ready != "ok" {
		t.Errorf("the guide's readiness block answered %q, want ok", ready)
	}
	t.Logf("the guide's check after the take-over: %d Services with their addresses, their pools owned and advertised, the module ready:\n%s",
		len(addrs), linesWith(out, "MetalLB mode chosen", ": ["))
}

// rowOf is the whitespace-separated fields of the first line of out whose
// first fields are lead.
func rowOf(out string, lead ...string) []string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= len(lead) && slices.Equal(f[:len(lead)], lead) {
			return f
		}
	}
	return nil
}
