package main

import (
	"encoding/json"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
)

// BenchmarkNativeGenerate1000x100 is the handler compiled natively, through
// the same JSON path as in Wasm: the floor the Wasm call is compared with.
func BenchmarkNativeGenerate1000x100(b *testing.B) {
	req := sdktest.Snapshot(1000, 100)
	req.APIVersion, req.Kind = sdk.APIVersion, sdk.KindGenerateRequest
	in, _ := json.Marshal(req)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := Module.HandleGenerate(in); err != nil {
			b.Fatal(err)
		}
	}
}
