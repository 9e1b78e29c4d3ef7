package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// TestSelectedByURL selects the built module the way a user does, with a
// loadbalancer URL naming the mounted file, and checks what the CCM's loader
// makes of it: the declared kinds and namespace, an accepted output, and
// the clear start-up errors of a wrong URL.
func TestSelectedByURL(t *testing.T) {
	wasm := sdktest.Build(t, ".")
	dir := t.TempDir()
	path := filepath.Join(dir, "bird.wasm")
	if err := os.WriteFile(path, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	digest := hex.EncodeToString(sum[:])
	cache := t.TempDir()

	for _, tc := range []struct {
		name    string
		query   string
		wantNS  string
		wantErr string
	}{
		{name: "namespace", query: "?namespace=bird", wantNS: "bird"},
		{name: "pinned, other name", query: "?namespace=net&name=bird-peers&sha256=" + digest, wantNS: "net"},
		{name: "no namespace", query: "", wantErr: "needs the namespace of its ConfigMap; add ?namespace=<ns>"},
		{name: "typo", query: "?namespace=bird&nmae=x", wantErr: `does not know the option "nmae"`},
		{name: "BGP timers and BFD", query: "?namespace=bird&holdTime=9s&keepaliveTime=3s&bfdInterval=300ms&bfdMultiplier=3", wantNS: "bird"},
		{name: "bad hold time", query: "?namespace=bird&holdTime=2s", wantErr: "holdTime 2s is out of range; use 3s to 65535s"},
		{name: "wrong pin", query: "?namespace=bird&sha256=" + strings.Repeat("0", 64), wantErr: "but the loadbalancer URL pins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb, err := config.ParseLoadBalancer("wasm://" + path + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if lb.Kind != config.LBWasm || lb.Path != path {
				t.Fatalf("parsed %+v, want a wasm module at %s", lb, path)
			}
			m, err := lbmodule.Load(context.Background(), lb, wasmhost.Options{CacheDir: cache})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())

			d := m.Describe()
			want := []sdk.ObjectKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: tc.wantNS}}
			if d.Name != "bird" || d.Version != Module.Version || !reflect.DeepEqual(d.Emits, want) || len(d.Reads) != 0 || d.NodeAnnotations {
				t.Fatalf("describe = %+v, want bird %s emitting exactly %+v", d, Module.Version, want)
			}

			// Generate validates the output against the description; check
			// it again here so the test says so explicitly.
			req := sdk.GenerateRequest{Services: fixtureServices(), Nodes: fixtureNodes()}
			resp, err := m.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			req.Options = m.Options()
			if err := wasmhost.ValidateOutput(d, req, resp); err != nil {
				t.Fatalf("the host refuses the output: %v", err)
			}
			if len(resp.Objects) != 1 || resp.Objects[0].Namespace() != tc.wantNS {
				t.Fatalf("objects = %v", resp.Objects)
			}
		})
	}
}
