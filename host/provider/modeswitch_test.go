package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

var metallbKinds = []schema.GroupVersionResource{ipAddressPools, bgpPeers, bgpAdvertisements}

// ownedMetalLB counts the CCM-owned MetalLB custom resources per resource.
func ownedMetalLB(t *testing.T, dyn dynamic.Interface) (map[string]int, int) {
	t.Helper()
	out, total := map[string]int{}, 0
	for _, gvr := range metallbKinds {
		l, err := dyn.Resource(gvr).Namespace(metallbNS).List(context.Background(), metav1.ListOptions{LabelSelector: sdk.OwnedLabel + "=" + sdk.OwnedValue})
		if err != nil {
			t.Fatal(err)
		}
		out[gvr.Resource] = len(l.Items)
		total += len(l.Items)
	}
	return out, total
}

// TestModeSwitchPrunes: MetalLB CRDs, then kube-vip, then the MetalLB
// ConfigMap, each a new CCM process on the same cluster (a changed
// loadbalancer URL is a restart). Each restart finds the previous mode's
// objects through the persistent kinds record and prunes them; no list of
// a namespaced kind ever leaves the declared namespace.
func TestModeSwitchPrunes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	crd := newHarness(t, harnessOptions{})
	dyn := dynamic.NewForConfigOrDie(crd.env.Config)
	crd.addNode("node-0", nil)
	crd.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	crd.eventually("MetalLB CRD objects for web", func() (bool, string) {
		n, total := ownedMetalLB(t, dyn)
		// Two advertisements: metro da's, restricted to its nodes, and
		// the default one, with no pool left to list.
		return n["ipaddresspools"] == 1 && n["bgppeers"] == 2 && n["bgpadvertisements"] == 2, fmt.Sprintf("%v (%d)", n, total)
	})
	ip, _ := crd.serviceIP("web")
	crd.Stop()

	// Restart as kube-vip: nothing of the CRD mode is left.
	kv := newHarness(t, harnessOptions{env: crd.env, emu: crd.emu, settings: map[string]any{"loadbalancer": "kube-vip://"}})
	kv.eventually("the CRD mode's objects pruned", func() (bool, string) {
		n, total := ownedMetalLB(t, dyn)
		return total == 0, fmt.Sprint(n)
	})
	kv.eventually("the record forgets the MetalLB kinds", func() (bool, string) {
		raw := recordedKinds(t, kv)
		return !strings.Contains(raw, "metallb.io"), raw
	})
	if got, _ := kv.serviceIP("web"); got != ip {
		t.Fatalf("web's address changed across the switch: %q, was %s", got, ip)
	}
	kv.Stop()

	// Restart as the MetalLB ConfigMap: the user's ConfigMap gets web's pool.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config", Namespace: metallbNS}, Data: map[string]string{"config": "address-pools:\n- name: user-pool\n  protocol: bgp\n  addresses: [192.0.2.0/28]\n"}}
	if _, err := kv.kube.CoreV1().ConfigMaps(metallbNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	legacy := newHarness(t, harnessOptions{env: crd.env, emu: crd.emu, settings: map[string]any{"loadbalancer": "metallb:///metallb-system/config"}})
	legacy.eventually("web's pool in the ConfigMap", func() (bool, string) {
		got, err := legacy.kube.CoreV1().ConfigMaps(metallbNS).Get(ctx, "config", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := got.Data["config"]
		return strings.Contains(c, "name: default/web") && strings.Contains(c, ip+"/32") && strings.Contains(c, "user-pool"), c
	})
	if n, total := ownedMetalLB(t, dyn); total != 0 {
		t.Fatalf("MetalLB custom resources left after two switches: %v", n)
	}

	events, err := crd.env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range testenv.CallsBy(testenv.Calls(events), ccmUser) {
		if c.Verb == "list" && (c.APIGroup == "metallb.io" || c.Resource == "configmaps") && c.Namespace == "" {
			t.Errorf("the CCM listed %s across all namespaces: %s", c.Resource, c)
		}
	}
}

func recordedKinds(t *testing.T, h *harness) string {
	t.Helper()
	cm, err := h.kube.CoreV1().ConfigMaps(lbmodule.RecordNamespace).Get(context.Background(), lbmodule.RecordName, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var kinds []map[string]string
	if err := json.Unmarshal([]byte(cm.Data["kinds"]), &kinds); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(kinds)
}
