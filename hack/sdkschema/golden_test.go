package sdkschema

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// TestGoldenOutputsAccepted runs the host's output validation (the
// declaration checks and the API server's: schemas, size limits) over
// every golden output of the built-in modules and of the example modules,
// so that a schema that refuses what a built-in writes fails here, next to
// the generator, and not in a cluster. The declaration is made from the
// objects themselves: golden.RunWasm checks the real one, through the Wasm.
func TestGoldenOutputsAccepted(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"../../modules/*/testdata/*.json", "../../examples/modules/*/testdata/*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	seen := map[string]int{}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var resp sdk.GenerateResponse
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			dec.UseNumber() // as the host decodes
			if err := dec.Decode(&resp); err != nil {
				t.Fatalf("not a generate response: %v", err)
			}
			d := sdk.Description{APIVersion: sdk.APIVersion, Kind: sdk.KindDescribeResponse, Name: "golden", NodeAnnotations: len(resp.NodeAnnotations) > 0}
			for _, o := range resp.Objects {
				k := sdk.ObjectKind{APIVersion: o.APIVersion(), Kind: o.Kind(), Namespace: o.Namespace()}
				if !slices.ContainsFunc(d.Emits, func(e sdk.ObjectKind) bool { return e.APIVersion == k.APIVersion && e.Kind == k.Kind }) {
					d.Emits = append(d.Emits, k)
				}
				seen[k.APIVersion+" "+k.Kind]++
			}
			var req sdk.GenerateRequest
			for n := range resp.NodeAnnotations {
				req.Nodes = append(req.Nodes, sdk.Node{Name: n})
			}
			if err := wasmhost.ValidateOutput(d, req, resp); err != nil {
				t.Errorf("the host refuses a golden output: %v", err)
			}
		})
	}
	// Not vacuous: the goldens hold every kind the built-ins write.
	for _, k := range []string{"v1 ConfigMap", "v1 Secret", "metallb.io/v1beta1 IPAddressPool", "metallb.io/v1beta1 BGPAdvertisement", "metallb.io/v1beta2 BGPPeer"} {
		if seen[k] == 0 {
			t.Errorf("no golden output holds a %s (seen: %v)", k, seen)
		}
	}
}
