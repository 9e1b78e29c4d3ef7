package provider

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/readiness"
)

func check(checks []readiness.Check, name string) readiness.Check {
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	return readiness.Check{Name: name, Reason: "missing"}
}

// TestReadinessFollowsTheModule: the module check fails, with the reason,
// while the module's output cannot be applied (its namespace does not
// exist), and passes again once it can; the other checks pass throughout.
func TestReadinessFollowsTheModule(t *testing.T) {
	wasm, err := filepath.Abs("../../examples/modules/bird/bird.wasm")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{settings: map[string]any{"loadbalancer": "wasm://" + wasm + "?namespace=bird"}})
	ctx := context.Background()
	h.addNode("node-0", nil)
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.eventually("not ready: the module's output has nowhere to go", func() (bool, string) {
		c := check(h.cloud.Readiness(), "module")
		return !c.OK && strings.Contains(c.Reason, "bird"), c.Reason
	})
	for _, name := range []string{"equinix-api", "policies", "caches"} {
		if c := check(h.cloud.Readiness(), name); !c.OK {
			t.Errorf("%s: %s", name, c.Reason)
		}
	}
	if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bird"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("ready again once the module's sync succeeds", func() (bool, string) {
		c := check(h.cloud.Readiness(), "module")
		return c.OK, c.Reason
	})
}
