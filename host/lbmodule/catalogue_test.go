package lbmodule_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

const fakePassword = "fake-bgp-password-for-tests"

var cacheDir string

func TestMain(m *testing.M) {
	// One compilation cache for the whole package: compiling a Go module
	// cold takes seconds, from the cache tens of milliseconds.
	dir, err := os.MkdirTemp("", "lbmodule-cache")
	if err != nil {
		panic(err)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// opts are tight limits for tests, with a deadline generous enough for a
// machine loaded by parallel builds.
func opts() wasmhost.Options {
	return wasmhost.Options{CacheDir: cacheDir, MemoryLimitMiB: 32, Timeout: 20 * time.Second}
}

// The runtime's own refusals are tested in sdk/wasmhost; these are the
// catalogue's: the loadbalancer setting and the module file it names.
func TestLoadRejects(t *testing.T) {
	empty := sdktest.Build(t, "../../modules/empty")
	dir := t.TempDir()
	good := filepath.Join(dir, "empty.wasm")
	if err := os.WriteFile(good, empty, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(empty)
	for _, tc := range []struct {
		name string
		load func() (*wasmhost.Module, error)
		msg  string
	}{
		{"missing file", func() (*wasmhost.Module, error) {
			return lbmodule.Load(context.Background(), config.LoadBalancer{Kind: config.LBWasm, Path: filepath.Join(dir, "nope.wasm")}, opts())
		}, "cannot be read (no such file or directory); mount the module file"},
		{"sha256 mismatch", func() (*wasmhost.Module, error) {
			return lbmodule.Load(context.Background(), config.LoadBalancer{Kind: config.LBWasm, Path: good, SHA256: strings.Repeat("0", 64)}, opts())
		}, "but the loadbalancer URL pins 0000"},
		{"load balancing off", func() (*wasmhost.Module, error) {
			return lbmodule.Load(context.Background(), config.LoadBalancer{}, opts())
		}, "loadbalancer is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.load()
			if err == nil {
				m.Close(context.Background())
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, tc.msg)
			}
		})
	}
	t.Run("sha256 pin that matches", func(t *testing.T) {
		m, err := lbmodule.Load(context.Background(), config.LoadBalancer{Kind: config.LBWasm, Path: good, SHA256: hex.EncodeToString(sum[:])}, opts())
		if err != nil {
			t.Fatal(err)
		}
		m.Close(context.Background())
	})
}

func TestUnknownSchemeIsAStartupError(t *testing.T) {
	_, err := config.ParseLoadBalancer("haproxy://x")
	if err == nil || !strings.Contains(err.Error(), `unknown type "haproxy"`) {
		t.Fatalf("got %v", err)
	}
}

// The documented scale fits the default memory limit (the SDK's collector
// tuning must not trade memory for speed past it).
func TestMetalLBScaleFitsDefaultLimit(t *testing.T) {
	o := wasmhost.Options{CacheDir: cacheDir, Timeout: 60 * time.Second}
	m := sdktest.Load(t, sdktest.Build(t, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, o)
	resp, err := m.Generate(context.Background(), sdktest.Snapshot(1000, 100))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Objects) != 1000+200+1+1 {
		t.Fatalf("%d objects, want 1000 pools + 200 peers + 1 advertisement + 1 password Secret", len(resp.Objects))
	}
}

// A built-in loads from the binary, or, in a build made without `make
// modules`, fails with the fix in the message.
func TestLoadBuiltin(t *testing.T) {
	for _, lb := range []config.LoadBalancer{
		{Kind: config.LBMetalLBCRD, Namespace: "metallb-system"},
		{Kind: config.LBMetalLBConfigMap, Namespace: "metallb-system", ConfigMap: "config"},
		{Kind: config.LBKubeVIP},
		{Kind: config.LBEmpty},
	} {
		t.Run(string(lb.Kind), func(t *testing.T) {
			m, err := lbmodule.Load(context.Background(), lb, opts())
			if err != nil {
				if !strings.Contains(err.Error(), "run make modules") {
					t.Fatal(err)
				}
				return
			}
			defer m.Close(context.Background())
			if _, err := m.Generate(context.Background(), sdktest.Snapshot(2, 2)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSourceFor(t *testing.T) {
	for _, tc := range []struct {
		url     string
		builtin string
		path    string
		opts    sdk.Options
	}{
		{"metallb:///", "metallb-crd", "", sdk.Options{Namespace: "metallb-system"}},
		{"metallb:///lb?crdConfiguration=true&x=y", "metallb-crd", "", sdk.Options{Namespace: "lb", Params: map[string]string{"x": "y"}}},
		{"metallb:///lb/cfg", "metallb-configmap", "", sdk.Options{Namespace: "lb", ConfigMap: "cfg"}},
		{"metallb:///lb?crdConfiguration=false", "metallb-configmap", "", sdk.Options{Namespace: "lb", ConfigMap: "config"}},
		{"kube-vip://", "kube-vip", "", sdk.Options{}},
		{"empty://", "empty", "", sdk.Options{}},
		{"wasm:///m/mine.wasm?sha256=" + strings.Repeat("a", 64) + "&k=v", "", "/m/mine.wasm", sdk.Options{Params: map[string]string{"k": "v"}}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			lb, err := config.ParseLoadBalancer(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			builtin, path, o, err := lbmodule.SourceFor(lb)
			if err != nil || builtin != tc.builtin || path != tc.path || !reflect.DeepEqual(o, tc.opts) {
				t.Errorf("got %q %q %+v %v, want %q %q %+v", builtin, path, o, err, tc.builtin, tc.path, tc.opts)
			}
		})
	}
}
