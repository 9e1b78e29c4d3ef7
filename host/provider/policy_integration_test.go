package provider

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// mountPolicies builds a policy directory as a user would mount it: the
// default policies, with the files of the given examples replacing theirs.
func mountPolicies(t *testing.T, examples ...string) string {
	t.Helper()
	dir := t.TempDir()
	copyRego := func(from string) {
		files, err := filepath.Glob(filepath.Join(from, "*.rego"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.rego") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyRego("../../policies")
	for _, e := range examples {
		copyRego(filepath.Join("../../examples/policies", e))
	}
	return dir
}

// TestCustomPolicies mounts two example policies: control-plane nodes get
// no BGP, and an EIP without a location goes to the metro where most BGP
// nodes are (the default would refuse it).
func TestCustomPolicies(t *testing.T) {
	t.Parallel()
	seed := emulator.DefaultSeed()
	seed.Devices = append(seed.Devices,
		emulator.DeviceSeed{Hostname: "cp-0", Metro: "da"},
		emulator.DeviceSeed{Hostname: "worker-0", Metro: "sv"},
		emulator.DeviceSeed{Hostname: "worker-1", Metro: "sv"},
	)
	h := newHarness(t, harnessOptions{seed: seed, settings: map[string]any{
		"policyDir": mountPolicies(t, "bgp-no-control-plane", "eip-majority-metro"),
	}})
	ctx := context.Background()
	h.addNode("cp-0", map[string]string{"node-role.kubernetes.io/control-plane": ""})
	h.addNode("worker-0", nil)
	h.addNode("worker-1", nil)

	h.eventually("only the workers get BGP annotations", func() (bool, string) {
		nodes, err := h.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, n := range nodes.Items {
			if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "" {
				got = append(got, n.Name)
			}
		}
		return fmt.Sprint(got) == "[worker-0 worker-1]", fmt.Sprintf("annotated: %v", got)
	})
	cp0, _ := h.emu.DeviceByHostname(emulator.DefaultProjectID, "cp-0")
	if s := h.emu.BGPSessions(cp0.ID); len(s) != 0 {
		t.Fatalf("the control-plane device got a BGP session: %v", s)
	}

	h.addService("placed", nil, "")
	h.eventually("the EIP is requested in the BGP nodes' metro", func() (bool, string) {
		ip, msg := h.serviceIP("placed")
		return ip != "", msg
	})
	res := h.emu.Reservations(emulator.DefaultProjectID, eip.Tags(h.clusterID(), "default", "placed")...)
	if len(res) != 1 || res[0].Metro != "sv" {
		t.Fatalf("reservation %+v; want one in metro sv, where both BGP nodes are", res)
	}
}

var bgpPeersGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}

// TestPolicyReloadReselects swaps the mounted BGP selection policy while the
// CCM runs, once as a plain file replace and once back: the control-plane
// node loses (then regains) its annotations and its MetalLB peers without
// any other event. Before the fix a reload was logged and nothing changed
// until some unrelated node update.
func TestPolicyReloadReselects(t *testing.T) {
	t.Parallel()
	seed := emulator.DefaultSeed()
	seed.Devices = append(seed.Devices,
		emulator.DeviceSeed{Hostname: "cp-0", Metro: "da"},
		emulator.DeviceSeed{Hostname: "worker-0", Metro: "da"},
	)
	dir := mountPolicies(t)
	h := newHarness(t, harnessOptions{seed: seed, settings: map[string]any{"policyDir": dir}})
	ctx := context.Background()
	h.addNode("cp-0", map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/hostname": "cp-0"})
	h.addNode("worker-0", map[string]string{"kubernetes.io/hostname": "worker-0"})
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	dyn := dynamic.NewForConfigOrDie(h.env.Config)

	// bgpState is who has annotations and who has MetalLB peers.
	bgpState := func() (string, string) {
		nodes, err := h.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error(), ""
		}
		var annotated []string
		for _, n := range nodes.Items {
			if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "" {
				annotated = append(annotated, n.Name)
			}
		}
		peers, err := dyn.Resource(bgpPeersGVR).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err.Error()
		}
		hosts := map[string]bool{}
		for _, p := range peers.Items {
			sels, _, _ := unstructured.NestedSlice(p.Object, "spec", "nodeSelectors")
			for _, s := range sels {
				m, _ := s.(map[string]any)
				labels, _ := m["matchLabels"].(map[string]any)
				if h, ok := labels["kubernetes.io/hostname"].(string); ok {
					hosts[h] = true
				}
			}
		}
		return fmt.Sprint(annotated), fmt.Sprint(slices.Sorted(maps.Keys(hosts)))
	}
	want := func(what, nodes string) {
		t.Helper()
		h.eventually(what, func() (bool, string) {
			annotated, peered := bgpState()
			return annotated == nodes && peered == nodes, fmt.Sprintf("annotated %s, peers for %s", annotated, peered)
		})
	}
	want("both nodes speak BGP under the default policy", "[cp-0 worker-0]")

	defaultBGP, err := os.ReadFile(filepath.Join(dir, "bgp.rego"))
	if err != nil {
		t.Fatal(err)
	}
	noCP, err := os.ReadFile("../../examples/policies/bgp-no-control-plane/bgp.rego")
	if err != nil {
		t.Fatal(err)
	}
	// A plain replace (write a new file, rename it over the old one), as an
	// editor or a config-management tool does.
	replace := func(content []byte) {
		t.Helper()
		tmp := filepath.Join(dir, ".bgp.rego.tmp")
		if err := os.WriteFile(tmp, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "bgp.rego")); err != nil {
			t.Fatal(err)
		}
	}
	replace(noCP)
	want("the reloaded policy takes the control-plane node out of BGP", "[worker-0]")
	replace(defaultBGP)
	want("the original policy puts it back", "[cp-0 worker-0]")

	// A file that does not compile: the policies in use keep deciding, and
	// readiness names the failed reload until a good file is back.
	replace([]byte("package metal.bgp\n\nthis is not rego\n"))
	h.eventually("not ready: the reload failed", func() (bool, string) {
		c := check(h.cloud.Readiness(), "policies")
		return !c.OK && strings.Contains(c.Reason, "reload failed, still using the previous policies"), c.Reason
	})
	want("the previous policy still decides", "[cp-0 worker-0]")
	replace(defaultBGP)
	h.eventually("ready again with the good file back", func() (bool, string) {
		c := check(h.cloud.Readiness(), "policies")
		return c.OK, c.Reason
	})
}
