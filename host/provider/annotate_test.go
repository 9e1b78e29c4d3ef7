package provider

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAnnotateBGPPassOff: with annotateBGPPass false a BGP node gets its
// peer annotations but not the password, and MetalLB still gets the password
// through its Secret.
func TestAnnotateBGPPassOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{settings: map[string]any{"annotateBGPPass": false, "bgpPass": "FakeBgpPass2026"}})
	ctx := context.Background()
	h.addNode("node-0", nil)
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.eventually("node-0 has its peer annotations and MetalLB the password Secret", func() (bool, string) {
		n, err := h.kube.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] == "" {
			return false, fmt.Sprintf("annotations %v", n.Annotations)
		}
		if _, err := h.kube.CoreV1().Secrets("metallb-system").Get(ctx, "equinix-metal-bgp-password", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	n, err := h.kube.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range n.Annotations {
		if k == "metal.equinix.com/bgp-peers-0-bgp-pass" || k == "metal.equinix.com/bgp-peers-1-bgp-pass" {
			t.Errorf("node-0 carries %s with annotateBGPPass false", k)
		}
	}
	h.checkRBAC()
}
