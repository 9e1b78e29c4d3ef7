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

// TestAdvertisementsByLocation: a pool whose Elastic IP has a known
// location is announced only by an advertisement restricted to that
// location's nodes, never by the default one (MetalLB announces a pool
// from a node if any of its advertisements selects the node); a default
// advertisement left with no pool selects none instead of listing none,
// which would announce every pool.
func TestAdvertisementsByLocation(t *testing.T) {
	svc := func(name, ip string, locs ...sdk.AddressLocation) sdk.Service {
		return sdk.Service{Namespace: "default", Name: name, IPs: []string{ip}, Locations: locs}
	}
	advs := func(t *testing.T, req sdk.GenerateRequest) (map[string]string, []string) {
		t.Helper()
		resp, err := generate(req)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, o := range resp.Objects {
			if o.Kind() == "BGPAdvertisement" {
				b, _ := json.Marshal(o["spec"])
				out[o.Name()] = string(b)
				if o.Name() != advName && o.Labels()[cpLabel] != "" {
					t.Errorf("%s carries %s: upstream and userAdvertisement would take it for a user's own", o.Name(), cpLabel)
				}
			}
		}
		return out, resp.Warnings
	}
	t.Run("all located", func(t *testing.T) {
		got, warnings := advs(t, sdk.GenerateRequest{Services: []sdk.Service{
			svc("a", "198.18.0.8", sdk.AddressLocation{IP: "198.18.0.8", Metro: "sv"}),
			svc("b", "198.18.0.9", sdk.AddressLocation{IP: "198.18.0.9", Metro: "da"}),
		}})
		want := map[string]string{
			advName:                          `{"ipAddressPools":[],"ipAddressPoolSelectors":[{"matchLabels":{"lb.metal.equinix.com/no-pool":"none"}}]}`,
			"equinix-metal-bgp-adv-metro-da": `{"ipAddressPools":["default.b"],"nodeSelectors":[{"matchLabels":{"topology.kubernetes.io/region":"da"}}]}`,
			"equinix-metal-bgp-adv-metro-sv": `{"ipAddressPools":["default.a"],"nodeSelectors":[{"matchLabels":{"topology.kubernetes.io/region":"sv"}}]}`,
		}
		if len(warnings) != 0 || len(got) != len(want) {
			t.Fatalf("advertisements %v, warnings %v", got, warnings)
		}
		for name, spec := range want {
			if !equalJSON(t, got[name], spec) {
				t.Errorf("%s: %s, want %s", name, got[name], spec)
			}
		}
	})
	t.Run("addresses of one pool in two places", func(t *testing.T) {
		got, warnings := advs(t, sdk.GenerateRequest{Services: []sdk.Service{
			{Namespace: "default", Name: "two", IPs: []string{"198.18.0.8", "198.18.0.9"}, Locations: []sdk.AddressLocation{
				{IP: "198.18.0.8", Metro: "sv"}, {IP: "198.18.0.9", Metro: "da"}}},
		}})
		if len(got) != 1 || !strings.Contains(got[advName], "default.two") || len(warnings) != 1 || !strings.Contains(warnings[0], "reserved in different places") {
			t.Fatalf("advertisements %v, warnings %v", got, warnings)
		}
	})
	t.Run("a location no label value can hold", func(t *testing.T) {
		got, warnings := advs(t, sdk.GenerateRequest{Services: []sdk.Service{
			svc("odd", "198.18.0.8", sdk.AddressLocation{IP: "198.18.0.8", Metro: "not a label"}),
		}})
		if len(got) != 1 || !strings.Contains(got[advName], "default.odd") || len(warnings) != 1 {
			t.Fatalf("advertisements %v, warnings %v", got, warnings)
		}
	})
	t.Run("the user's own advertisement", func(t *testing.T) {
		mine := sdk.Object{"apiVersion": advAPI, "kind": "BGPAdvertisement", "metadata": map[string]any{"name": "mine", "namespace": "metallb-system", "labels": map[string]any{cpLabel: cpValue}}}
		got, _ := advs(t, sdk.GenerateRequest{Existing: []sdk.Object{mine}, Services: []sdk.Service{
			svc("a", "198.18.0.8", sdk.AddressLocation{IP: "198.18.0.8", Metro: "sv"}),
		}})
		if len(got) != 0 {
			t.Fatalf("advertisements %v next to the user's own", got)
		}
	})
}

func equalJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// TestKeptSelectors: which existing selectors of a peer are upstream's for
// its node, and so kept as they are (a change would restart the session).
func TestKeptSelectors(t *testing.T) {
	host := func(h string) any { return map[string]any{"matchLabels": map[string]any{metallb.HostnameLabel: h}} }
	nomatch := func(svc string) any {
		return map[string]any{"matchLabels": map[string]any{nomatchPrefix + "service-name": svc, nomatchPrefix + "service-namespace": "default"}}
	}
	for _, tc := range []struct {
		name     string
		existing []any
		want     bool
	}{
		{"upstream's", []any{host("n1"), nomatch("a"), nomatch("b")}, true},
		{"upstream's, hostname last", []any{nomatch("a"), host("n1")}, true},
		{"none", nil, false},
		{"the hostname alone", []any{host("n1")}, false},
		{"another node's", []any{host("n2"), nomatch("a")}, false},
		{"the hostname twice", []any{host("n1"), host("n1"), nomatch("a")}, false},
		{"no hostname", []any{nomatch("a"), nomatch("b")}, false},
		{"a user's selector", []any{host("n1"), nomatch("a"), map[string]any{"matchLabels": map[string]any{"rack": "a"}}}, false},
		{"a nomatch label beside another", []any{host("n1"), map[string]any{"matchLabels": map[string]any{nomatchPrefix + "service-name": "a", "rack": "a"}}}, false},
		{"match expressions", []any{host("n1"), map[string]any{"matchLabels": map[string]any{nomatchPrefix + "service-name": "a"}, "matchExpressions": []any{}}}, false},
		{"an empty selector", []any{host("n1"), map[string]any{"matchLabels": map[string]any{}}}, false},
		{"not an object", []any{host("n1"), "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := keptSelectors(tc.existing, "n1")
			if ok != tc.want {
				t.Fatalf("kept = %v, want %v", ok, tc.want)
			}
			if ok && len(got) != len(tc.existing) {
				t.Fatalf("kept %v, want %v as it was", got, tc.existing)
			}
		})
	}
}
