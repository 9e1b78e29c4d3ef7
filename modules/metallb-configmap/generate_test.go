package main

import (
	"fmt"
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

// TestPeersStayAsServicesChange: the peers the CCM writes do not depend
// on the Services. MetalLB <= 0.12 resets a BGP session whenever its
// peer's entry changes, so a peer that listed its Services (upstream's
// form) reset every session on every Service created or deleted.
func TestPeersStayAsServicesChange(t *testing.T) {
	nodes := []sdk.Node{{Name: "node-1", LocalASN: 65000, SourceIP: "10.0.0.1",
		Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1", Multihop: true}, {ASN: 65530, IP: "169.254.255.2", Multihop: true}}}}
	cm := sdk.Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "config", "namespace": "metallb-system"}, "data": map[string]any{"config": ""}}
	svc := func(name, ip string) sdk.Service {
		return sdk.Service{Namespace: "default", Name: name, IPs: []string{ip}}
	}
	peersOf := func(services ...sdk.Service) string {
		t.Helper()
		resp, err := generate(sdk.GenerateRequest{Nodes: nodes, Services: services, Existing: []sdk.Object{cm}})
		if err != nil || len(resp.Objects) != 1 {
			t.Fatalf("generate: %v, %d objects", err, len(resp.Objects))
		}
		config := resp.Objects[0]["data"].(map[string]any)[configKey].(string)
		_, peers, ok := strings.Cut(config, "peers:\n")
		if !ok {
			t.Fatalf("no peers in %q", config)
		}
		return peers
	}
	one := peersOf(svc("a", "147.75.0.1"))
	for _, tc := range []struct {
		name     string
		services []sdk.Service
	}{
		{"a Service added", []sdk.Service{svc("a", "147.75.0.1"), svc("b", "147.75.0.2")}},
		{"another instead", []sdk.Service{svc("c", "147.75.0.3")}},
		{"twenty", func() (s []sdk.Service) {
			for i := range 20 {
				s = append(s, svc(fmt.Sprintf("s%d", i), fmt.Sprintf("147.75.0.%d", 10+i)))
			}
			return s
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := peersOf(tc.services...); got != one {
				t.Errorf("peers changed with the Services:\n%s\nwant\n%s", got, one)
			}
		})
	}
	if !strings.Contains(one, svcNameKey+": "+ownMarker) || strings.Count(one, "peer-address") != 2 {
		t.Errorf("peers %q: want two, each marked %s: %s", one, svcNameKey, ownMarker)
	}
}
