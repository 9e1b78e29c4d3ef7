package main

import (
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/modules/internal/golden"
	"github.com/metal-ccm/cloud-provider-equinix-metal/modules/internal/metallb"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestGolden(t *testing.T) { golden.Run(t, Module) }

func TestWasmMatchesNative(t *testing.T) { golden.RunWasm(t, Module) }

// TestLegacyKeyWarnings: MetalLB <= 0.12 reads only the older annotation.
func TestLegacyKeyWarnings(t *testing.T) {
	svc := func(name string, ann map[string]string) sdk.Service {
		return sdk.Service{Namespace: "ns", Name: name, IPs: []string{"147.75.0.1"}, SharingKey: "k", Annotations: ann}
	}
	legacy := map[string]string{legacyAnnotation: "k"}
	current := map[string]string{"metallb.io/allow-shared-ip": "k"}
	for _, tc := range []struct {
		name     string
		services []sdk.Service
		want     string // "" = no warning
	}{
		{"older form on both", []sdk.Service{svc("a", legacy), svc("b", legacy)}, ""},
		{"both forms", []sdk.Service{svc("a", legacy), svc("b", map[string]string{legacyAnnotation: "k", "metallb.io/allow-shared-ip": "k"})}, ""},
		{"current form only on one", []sdk.Service{svc("a", legacy), svc("b", current)}, "Services ns/b share 147.75.0.1/32"},
		{"one Service of a key", []sdk.Service{svc("a", current)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pools, _ := metallb.Pools(tc.services)
			got := strings.Join(legacyKeyWarnings(pools, tc.services), "; ")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}
