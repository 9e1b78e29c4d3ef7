package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/modules/internal/golden"
	"github.com/metal-ccm/cloud-provider-equinix-metal/modules/internal/metallb"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestGolden(t *testing.T) { golden.Run(t, Module) }

func TestWasmMatchesNative(t *testing.T) { golden.RunWasm(t, Module) }

// TestAdvertisementTakeOver: which existing advertisements make the module
// emit its default one. Upstream v3.8.1's equinix-metal-bgp-adv carries the
// cloud-provider label but not the owned-by label; it is adopted, never
// taken for the user's.
func TestAdvertisementTakeOver(t *testing.T) {
	const ns = "metallb-system"
	adv := func(name string, owned bool) sdk.Object {
		labels := map[string]any{cpLabel: cpValue}
		if owned {
			labels[sdk.OwnedLabel] = sdk.OwnedValue
		}
		return sdk.Object{"apiVersion": advAPI, "kind": "BGPAdvertisement", "metadata": map[string]any{"name": name, "namespace": ns, "labels": labels}}
	}
	cases := []struct {
		name     string
		existing []sdk.Object
		want     bool
	}{
		{"nothing", nil, true},
		{"upstream's default", []sdk.Object{adv(advName, false)}, true},
		{"our default", []sdk.Object{adv(advName, true)}, true},
		{"the user's own", []sdk.Object{adv("mine", false)}, false},
		{"the user's own and ours", []sdk.Object{adv("mine", false), adv(advName, true)}, false},
		{"the user's own and upstream's", []sdk.Object{adv("mine", false), adv(advName, false)}, true},
	}
	svc := []sdk.Service{{Namespace: "default", Name: "web", IPs: []string{"198.18.0.8"}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := generate(sdk.GenerateRequest{Services: svc, Existing: tc.existing})
			if err != nil {
				t.Fatal(err)
			}
			got := false
			for _, o := range resp.Objects {
				if o.Kind() == "BGPAdvertisement" && o.Name() == advName {
					got = true
				}
			}
			if got != tc.want {
				t.Fatalf("default advertisement emitted = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPoolCarriesUpstreamLabels: upstream v3.8.1 reads a pool as a
// Service's by service-<name>: namespace-<namespace>; a name too long for a
// label gets none rather than an invalid one.
func TestPoolCarriesUpstreamLabels(t *testing.T) {
	long := strings.Repeat("x", 60)
	resp, err := generate(sdk.GenerateRequest{Services: []sdk.Service{
		{Namespace: "default", Name: "svc-000", IPs: []string{"198.18.0.8"}},
		{Namespace: "default", Name: long, IPs: []string{"198.18.0.9"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]string{}
	for _, o := range resp.Objects {
		if o.Kind() == "IPAddressPool" {
			labels[o.Name()] = o.Labels()
		}
	}
	if got := labels["default.svc-000"]; got["service-svc-000"] != "namespace-default" || got[cpLabel] != cpValue {
		t.Errorf("default.svc-000 labels = %v", got)
	}
	if got := labels["default."+long]; len(got) != 1 || got[cpLabel] != cpValue {
		t.Errorf("long-named pool labels = %v, want only %s", got, cpLabel)
	}
}

// TestPoolName: a sharing key's pool keeps its name, "shared.<ip>", from
// the first Service of the key to the last, so Services joining and leaving
// never rename (recreate) the pool of an address in use.
func TestPoolName(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool metallb.Pool
		want string
	}{
		{"one Service", metallb.Pool{Services: []string{"ns/web"}, CIDRs: []string{"147.75.0.1/32"}}, "ns.web"},
		{"one Service of a key", metallb.Pool{Services: []string{"ns/dns"}, CIDRs: []string{"147.75.0.1/32"}, SharingKey: "dns"}, "shared.147.75.0.1"},
		{"three of a key", metallb.Pool{Services: []string{"a/dns", "b/dns", "ns/dns"}, CIDRs: []string{"147.75.0.1/32"}, SharingKey: "dns"}, "shared.147.75.0.1"},
		{"two without a common key", metallb.Pool{Services: []string{"a/x", "b/y"}, CIDRs: []string{"147.75.0.1/32"}}, "shared.147.75.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := poolName(tc.pool); got != tc.want {
				t.Fatalf("poolName = %q, want %q", got, tc.want)
			}
		})
	}
}

// Two Services named alike in two namespaces share a pool: the pool
// carries one upstream label for the name, with the later namespace, as
// when the labels were a map.
func TestSharedPoolOfNamesakes(t *testing.T) {
	svc := func(ns string) sdk.Service {
		return sdk.Service{Namespace: ns, Name: "web", UID: "uid-" + ns, IPs: []string{"145.40.1.9"}, SharingKey: "k",
			Ports: []sdk.Port{{Protocol: "TCP", Port: 80}}, Annotations: map[string]string{"metallb.io/allow-shared-ip": "k"}}
	}
	a, b := svc("a"), svc("b")
	b.Ports[0].Port = 443
	resp, err := generate(sdk.GenerateRequest{Services: []sdk.Service{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range resp.Objects {
		if o.Kind() != "IPAddressPool" {
			continue
		}
		if got := o.Labels(); len(got) != 2 || got["service-web"] != "namespace-b" || got[cpLabel] != cpValue {
			t.Errorf("pool %s labels %v, want cloud-provider and service-web=namespace-b", o.Name(), got)
		}
		if _, err := json.Marshal(o); err != nil { // a name twice would not
			t.Errorf("the pool does not encode: %v", err)
		}
		return
	}
	t.Fatalf("no pool in %v", resp.Objects)
}
