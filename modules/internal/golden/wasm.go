package golden

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// RunWasm builds the module in the current directory for wasip1, runs it in
// the host over every case, and checks that the host accepts its output and
// that it equals the native handler's output byte for byte.
func RunWasm(t *testing.T, m sdk.Module) {
	wasm := sdktest.Build(t, ".")
	cache := t.TempDir()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			mod, err := wasmhost.LoadBytes(context.Background(), m.Name, wasm, c.Options, wasmhost.Options{CacheDir: cache})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = mod.Close(context.Background()) }() // the test is over with it
			req := c.Request
			req.Existing = Visible(mod.Describe(), c.Existing)
			got, err := mod.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			again, err := mod.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(got)
			againJSON, _ := json.Marshal(again)
			if !bytes.Equal(gotJSON, againJSON) {
				t.Fatalf("two Wasm calls differ:\n%s\n%s", gotJSON, againJSON)
			}
			native := Generate(t, m, c)
			if !bytes.Equal(gotJSON, native) {
				t.Errorf("Wasm output differs from the native handler's:\nwasm:   %s\nnative: %s", gotJSON, native)
			}
		})
	}
}
