package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/readiness"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
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
	t.Parallel()
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

// TestModuleReloadKeepsTheLastGood replaces a running CCM's file module:
// with a file that does not load, the previous module keeps working and
// readiness names the failure; with the good file back, ready again; with
// another valid module, that module is used without a restart.
func TestModuleReloadKeepsTheLastGood(t *testing.T) {
	t.Parallel()
	old := moduleResync
	moduleResync = time.Second // a missed change event costs a second, not a minute
	defer func() { moduleResync = old }()
	bird, err := os.ReadFile("../../examples/modules/bird/bird.wasm")
	if err != nil {
		t.Fatal(err)
	}
	empty, err := os.ReadFile("../../modules/wasm/empty.wasm")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "lb.wasm")
	// A replace as a volume update makes it: a new file renamed over the old.
	put := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	put(bird)
	h := newHarness(t, harnessOptions{settings: map[string]any{"loadbalancer": "wasm://" + path + "?namespace=bird"}})
	ctx := context.Background()
	if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bird"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.addNode("node-0", nil)
	routes := func() string {
		cm, err := h.kube.CoreV1().ConfigMaps("bird").Get(ctx, "bird", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return cm.Data["ccm_services.conf"]
	}
	serves := func(svc string) func() (bool, string) {
		return func() (bool, string) {
			ip, why := h.serviceIP(svc)
			if ip == "" {
				return false, why
			}
			r := routes()
			return strings.Contains(r, ip), fmt.Sprintf("%s has %s; the module's routes: %s", svc, ip, r)
		}
	}
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.eventually("the module routes web", serves("web"))
	if c := check(h.cloud.Readiness(), "module"); !c.OK {
		t.Fatalf("module: %s", c.Reason)
	}

	put([]byte("not a wasm module"))
	h.eventually("not ready: the new file does not load", func() (bool, string) {
		c := check(h.cloud.Readiness(), "module")
		return !c.OK && strings.Contains(c.Reason, "failed to load, still using the previous module"), c.Reason
	})
	h.addService("api", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.eventually("the previous module still routes a new Service", serves("api"))
	if c := check(h.cloud.Readiness(), "module"); c.OK {
		t.Errorf("ready again while the file still does not load: %s", c.Reason)
	}

	put(bird)
	h.eventually("ready again with the good module back", func() (bool, string) {
		c := check(h.cloud.Readiness(), "module")
		return c.OK, c.Reason
	})

	// Another valid module is taken into use: the empty one writes nothing,
	// so the bird ConfigMap it no longer wants is pruned.
	put(empty)
	h.eventually("the new module is used without a restart", func() (bool, string) {
		r := routes()
		return strings.Contains(r, "not found"), "bird ConfigMap: " + r
	})
	if c := check(h.cloud.Readiness(), "module"); !c.OK {
		t.Errorf("module: %s", c.Reason)
	}
}

// TestReadinessUnreachableAPI: while every Equinix call fails without an
// answer (503s, then resets), readiness says the API does not answer, and
// recovers on the next answered call once the faults stop.
func TestReadinessUnreachableAPI(t *testing.T) {
	t.Parallel()
	old := metal.UnreachableAfter
	metal.UnreachableAfter = time.Second
	defer func() { metal.UnreachableAfter = old }()
	h := newHarness(t, harnessOptions{})
	h.addNode("node-0", nil)
	h.eventually("ready", func() (bool, string) {
		c := check(h.cloud.Readiness(), "equinix-api")
		return c.OK, c.Reason
	})
	h.emu.SetFault(emulator.AllRoutes, emulator.Fault{UnavailableShare: 0.5, ResetShare: 0.5})
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.eventually("not ready: the API does not answer", func() (bool, string) {
		c := check(h.cloud.Readiness(), "equinix-api")
		return !c.OK && strings.Contains(c.Reason, "has not answered since"), c.Reason
	})
	h.emu.ClearFaults()
	h.eventually("ready again once the API answers", func() (bool, string) {
		c := check(h.cloud.Readiness(), "equinix-api")
		return c.OK, c.Reason
	})
	h.eventually("the Service got its address", func() (bool, string) {
		ip, why := h.serviceIP("web")
		return ip != "", why
	})
}
