package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/ocimodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/ociregistry"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// TestModuleByDigest pushes the example BIRD module to an in-process OCI
// registry, starts the CCM with its wasm+oci://…@sha256: reference and
// waits for the module's ConfigMap; then a wrong digest, an unreachable
// registry and an artifact that is not Wasm each stop the CCM at start with
// a clear error and leave the cluster as it was.
func TestModuleByDigest(t *testing.T) {
	t.Parallel()
	wasm, err := os.ReadFile("../../examples/modules/bird/bird.wasm")
	if err != nil {
		t.Fatalf("%v (run make examples)", err)
	}
	host, _ := ociregistry.Start(t)
	img, err := ocimodule.Package(wasm, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ref := ociregistry.Push(t, host, "examples/bird", img)
	notWasm, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	notWasmRef := ociregistry.Push(t, host, "examples/app", notWasm)

	env := testenv.New(t, testenv.Options{AuditLog: true, Users: []testenv.User{{Name: ccmUser, Groups: []string{"system:masters"}}}})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bird"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	birdConfigMaps := func() []string {
		cms, err := admin.CoreV1().ConfigMaps("bird").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range cms.Items {
			if cm.Name != "kube-root-ca.crt" {
				names = append(names, cm.Name)
			}
		}
		return names
	}

	refusals := []struct{ name, url, want string }{
		{"wrong digest", "wasm+oci://" + host + "/examples/bird@sha256:" + strings.Repeat("0", 64) + "?namespace=bird", "MANIFEST_UNKNOWN"},
		{"unreachable registry", "wasm+oci://127.0.0.1:1/examples/bird@" + strings.SplitN(ref, "@", 2)[1] + "?namespace=bird", "pulling from 127.0.0.1:1"},
		{"not Wasm", "wasm+oci://" + notWasmRef + "?namespace=bird", "is not a Wasm module artifact"},
	}
	emu := emulator.StartForTest(t, testSeed(3), emulator.Options{})
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			b, _ := json.Marshal(map[string]any{
				"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": emu.URL(),
				"loadbalancer": r.url, "moduleCacheDir": t.TempDir(),
			})
			cfg, err := config.Load(config.Sources{CloudConfig: b, Environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(cfg)
			if err == nil || !strings.Contains(err.Error(), r.want) || !strings.HasPrefix(err.Error(), "load-balancer module ") {
				t.Fatalf("New = %v, want a load-balancer module error with %q", err, r.want)
			}
			t.Logf("refused: %v", err)
			if got := birdConfigMaps(); len(got) != 0 {
				t.Errorf("the cluster changed: ConfigMaps %v in bird", got)
			}
		})
	}

	h := newHarness(t, harnessOptions{env: env, emu: emu, settings: map[string]any{"loadbalancer": "wasm+oci://" + ref + "?namespace=bird"}})
	h.addNode("node-0", nil)
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.eventually("the module's ConfigMap applied", func() (bool, string) {
		got := birdConfigMaps()
		return len(got) > 0, fmt.Sprintf("ConfigMaps in bird: %v", got)
	})
}
