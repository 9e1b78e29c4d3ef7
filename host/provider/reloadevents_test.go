package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// clusterEvents are the CCM's Events with reason on the kube-system
// Namespace, as "<type> x<count>: <message>".
func (h *harness) clusterEvents(reason string) []string {
	h.t.Helper()
	list, err := h.kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Source.Component != "cloud-provider-equinix-metal" || e.InvolvedObject.Kind != "Namespace" || e.InvolvedObject.Name != "kube-system" {
			continue
		}
		out = append(out, fmt.Sprintf("%s x%d: %s", e.Type, e.Count, e.Message))
	}
	return out
}

// TestReloadFailuresAreEvents: a mounted module file and a policy file
// that change into something that does not load each give one Warning
// Event on the kube-system Namespace (not one per resync), naming the
// file, the problem and that the last good version stays in use; once a
// good file is back, a Normal Event says so. Before, a failed reload was a
// log line, a gauge and /readyz only, nowhere `kubectl get events` shows.
func TestReloadFailuresAreEvents(t *testing.T) {
	t.Parallel()
	old := moduleResync
	moduleResync = time.Second // several resyncs within the test, which must not repeat the Event
	defer func() { moduleResync = old }()
	empty, err := os.ReadFile("../../modules/wasm/empty.wasm")
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(t.TempDir(), "lb.wasm")
	policies := mountPolicies(t)
	goodBGP, err := os.ReadFile(filepath.Join(policies, "bgp.rego"))
	if err != nil {
		t.Fatal(err)
	}
	// Replace as a volume update or an editor does: a new file renamed
	// over the old one.
	put := func(path string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	put(module, empty)
	h := newHarness(t, harnessOptions{settings: map[string]any{"loadbalancer": "wasm://" + module, "policyDir": policies}})

	put(module, []byte("not a wasm module"))
	put(filepath.Join(policies, "bgp.rego"), []byte("package equinix.bgp\n\nthis is not rego\n"))
	cases := []struct {
		failed, recovered string
		file              string // named in the Warning
		kept              string // says the last good version stays in use
	}{
		{"LoadBalancerModuleReloadFailed", "LoadBalancerModuleReloadRecovered", module, "last good module"},
		{"PolicyReloadFailed", "PolicyReloadRecovered", filepath.Join(policies, "bgp.rego"), "still using the previous policies"},
	}
	for _, c := range cases {
		h.eventually(c.failed+" is recorded", func() (bool, string) {
			got := h.clusterEvents(c.failed)
			return len(got) > 0, fmt.Sprintf("%s Events %q", c.failed, got)
		})
	}
	time.Sleep(5 * time.Second) // five module resyncs
	for _, c := range cases {
		got := h.clusterEvents(c.failed)
		t.Logf("%s: %q", c.failed, got)
		if len(got) != 1 || !strings.HasPrefix(got[0], "Warning x1: ") || !strings.Contains(got[0], c.file) || !strings.Contains(got[0], c.kept) {
			t.Errorf("%s Events %q; want one Warning, once, naming %s and saying %q", c.failed, got, c.file, c.kept)
		}
	}

	put(module, empty)
	put(filepath.Join(policies, "bgp.rego"), goodBGP)
	for _, c := range cases {
		h.eventually(c.recovered+" is recorded", func() (bool, string) {
			got := h.clusterEvents(c.recovered)
			return len(got) == 1 && strings.HasPrefix(got[0], "Normal x1: "), fmt.Sprintf("%s Events %q", c.recovered, got)
		})
	}
}
