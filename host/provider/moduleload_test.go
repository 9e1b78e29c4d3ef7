package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// TestNothingWaitsForTheModule holds the module's compilation and shows
// that what needs no module goes on meanwhile: the node is initialised
// (untainted, its BGP annotations written) and a Service gets its Elastic
// IP, while readiness says the module compiles; once the module is
// released, its MetalLB pool follows.
func TestNothingWaitsForTheModule(t *testing.T) {
	release := make(chan struct{})
	held := loadSource
	loadSource = func(src lbmodule.Source, ctx context.Context, o wasmhost.Options) (*wasmhost.Module, error) {
		<-release
		return held(src, ctx, o)
	}
	t.Cleanup(func() { loadSource = held })
	releaseOnce := func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}
	t.Cleanup(releaseOnce) // before the harness stops (cleanups run last first)

	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	h.addNode("node-0", nil)
	h.eventually("node initialised and annotated while the module compiles", func() (bool, string) {
		n, err := h.kube.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
				return false, "still tainted uninitialized"
			}
		}
		return n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "", fmt.Sprintf("annotations %v", n.Annotations)
	})
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	var ip string
	h.eventually("the Service's Elastic IP while the module compiles", func() (bool, string) {
		var msg string
		ip, msg = h.serviceIP("web")
		return ip != "", msg
	})
	if _, _, loading := h.cloud.module.state(); !loading {
		t.Fatal("the module loaded although its compilation is held")
	}
	if m := check(h.cloud.Readiness(), "module"); m.OK || !strings.Contains(m.Reason, "compiling") {
		t.Errorf("readiness while compiling: %+v, want not ready, compiling", m)
	}

	releaseOnce()
	if err := h.cloud.ModuleLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	h.waitForPool("the Service's MetalLB pool once the module loaded", ip)
	if m := check(h.cloud.Readiness(), "module"); !m.OK {
		t.Errorf("readiness once loaded: %+v", m)
	}
}

// TestModuleThatDoesNotCompile: a file with the WebAssembly header that is
// no module passes New (reading it is all New does) and ModuleLoaded names
// it, which is what the binary stops on; readiness says the same. A file
// without the header is refused by New itself.
func TestModuleThatDoesNotCompile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.wasm")
	if err := os.WriteFile(broken, []byte("\x00asm\x01\x00\x00\x00\x01\xff\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	notWasm := filepath.Join(dir, "main.go")
	if err := os.WriteFile(notWasm, []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{settings: map[string]any{"loadbalancer": "wasm://" + broken}})
	err := h.cloud.ModuleLoaded(context.Background())
	if err == nil || !strings.Contains(err.Error(), "load-balancer module "+broken+": is not a valid WebAssembly module") {
		t.Fatalf("ModuleLoaded = %v, want the file named as not a valid module", err)
	}
	if m := check(h.cloud.Readiness(), "module"); m.OK || m.Reason != err.Error() {
		t.Errorf("readiness: %+v, want not ready with %q", m, err)
	}

	cfg := *h.cfg
	cfg.LB.Path = notWasm
	if _, err := New(&cfg); err == nil || !strings.Contains(err.Error(), "does not start with the WebAssembly header") {
		t.Fatalf("New with a Go file as module = %v, want it refused at once", err)
	}
}
