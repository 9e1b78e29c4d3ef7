package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/modules/internal/golden"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metallbv1beta2 "go.universe.tf/metallb/api/v1beta2"
)

// strict decodes b into v and fails on any field MetalLB's Go type does not
// have: a typo in a field name would otherwise be dropped silently by the
// API server's pruning.
func strict(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

func TestOutputDecodesIntoMetalLBTypes(t *testing.T) {
	c := golden.Cases()[0]
	var resp sdk.GenerateResponse
	if err := json.Unmarshal(golden.Generate(t, Module, c), &resp); err != nil {
		t.Fatal(err)
	}
	pools, peers, advs := map[string]metallbv1beta1.IPAddressPool{}, map[string]metallbv1beta2.BGPPeer{}, []metallbv1beta1.BGPAdvertisement{}
	secrets := map[string]corev1.Secret{}
	for _, o := range resp.Objects {
		b, _ := json.Marshal(o)
		switch o.Kind() {
		case "IPAddressPool":
			var p metallbv1beta1.IPAddressPool
			strict(t, b, &p)
			pools[p.Name] = p
		case "BGPPeer":
			var p metallbv1beta2.BGPPeer
			strict(t, b, &p)
			peers[p.Name] = p
		case "BGPAdvertisement":
			var a metallbv1beta1.BGPAdvertisement
			strict(t, b, &a)
			advs = append(advs, a)
		case "Secret":
			var s corev1.Secret
			strict(t, b, &s)
			secrets[s.Name] = s
		}
		if o.Kind() != "Secret" && (bytes.Contains(b, []byte(golden.FakePassword)) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(golden.FakePassword))))) {
			t.Errorf("%s %s carries the BGP password; only the Secret may", o.Kind(), o.Name())
		}
		switch o.Kind() {
		case "IPAddressPool", "BGPPeer", "BGPAdvertisement", "Secret":
		default:
			t.Errorf("unexpected kind %s", o.Kind())
		}
	}
	if len(pools) != 3 || len(peers) != 6 || len(advs) != 1 || len(secrets) != 1 {
		t.Fatalf("got %d pools, %d peers, %d advertisements, %d secrets; want 3, 6, 1, 1", len(pools), len(peers), len(advs), len(secrets))
	}
	// What MetalLB requires of a passwordSecret: type basic-auth, in its
	// namespace, the password under "password".
	sec := secrets["equinix-metal-bgp-password"]
	if sec.Type != corev1.SecretTypeBasicAuth || sec.Namespace != "metallb-system" || string(sec.Data["password"]) != golden.FakePassword {
		t.Errorf("secret = %s/%s type %q with keys %d; want metallb-system/equinix-metal-bgp-password, %s, the password", sec.Namespace, sec.Name, sec.Type, len(sec.Data), corev1.SecretTypeBasicAuth)
	}
	if a := advs[0]; a.Name != "equinix-metal-bgp-adv" || len(a.Spec.IPAddressPools) != len(pools) {
		t.Errorf("advertisement %s lists %v, want all %d pools", a.Name, a.Spec.IPAddressPools, len(pools))
	}
	nginx := pools["default.nginx"]
	if nginx.Spec.AutoAssign == nil || *nginx.Spec.AutoAssign || len(nginx.Spec.Addresses) != 1 || nginx.Spec.Addresses[0] != "145.40.1.5/32" {
		t.Errorf("pool default.nginx = %+v, want autoAssign false and 145.40.1.5/32", nginx.Spec)
	}
	if shared := pools["shared.145.40.1.7"]; len(shared.Spec.Addresses) != 1 {
		t.Errorf("the two dns Services sharing 145.40.1.7 should share one pool, got %v", pools)
	}
	p := peers["worker-2-1"]
	if p.Spec.MyASN != 65000 || p.Spec.ASN != 65530 || p.Spec.Address != "169.254.255.2" || p.Spec.SrcAddress != "10.66.0.2" ||
		p.Spec.Password != "" || p.Spec.PasswordSecret.Name != sec.Name || p.Spec.PasswordSecret.Namespace != "metallb-system" || len(p.Spec.NodeSelectors) != 1 ||
		p.Spec.NodeSelectors[0].MatchLabels["kubernetes.io/hostname"] != "worker-2" {
		t.Errorf("peer worker-2-1 = %+v", p.Spec)
	}
}

func TestPoolNames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		services []sdk.Service
		want     []string
	}{
		{"one per service, dot keeps them apart", []sdk.Service{
			{Namespace: "ab", Name: "c", IPs: []string{"192.0.2.1"}},
			{Namespace: "a", Name: "bc", IPs: []string{"192.0.2.2"}},
		}, []string{"a.bc", "ab.c"}},
		{"same IP without sharing key still one pool", []sdk.Service{
			{Namespace: "x", Name: "a", IPs: []string{"192.0.2.1"}},
			{Namespace: "x", Name: "b", IPs: []string{"192.0.2.1"}},
		}, []string{"shared.192.0.2.1"}},
		{"ipv6", []sdk.Service{{Namespace: "x", Name: "v6", IPs: []string{"2001:db8::1"}}}, []string{"x.v6"}},
		{"not an IP is skipped", []sdk.Service{{Namespace: "x", Name: "bad", IPs: []string{"nope"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// FRR mode, where MetalLB takes IPv6 pools.
			resp, err := generate(sdk.GenerateRequest{Services: tc.services, Options: sdk.Options{Params: map[string]string{"bgpType": "frr"}}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range resp.Objects {
				if o.Kind() == "IPAddressPool" {
					got = append(got, o.Name())
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("pools %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("pools %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestDualStackObjects: on a dual-stack cluster the objects decode
// strictly into MetalLB's types; a dual-stack Service's pool holds both
// addresses (MetalLB assigns a Service's requested addresses from one
// pool), an IPv6 peer is a BGPPeer of its own, from the node's IPv6
// source, next to IPv4 peers that are exactly those of the same cluster
// without IPv6.
func TestDualStackObjects(t *testing.T) {
	byName := func(name string) map[string][]byte {
		t.Helper()
		for _, c := range golden.Cases() {
			if c.Name != name {
				continue
			}
			var resp sdk.GenerateResponse
			if err := json.Unmarshal(golden.Generate(t, Module, c), &resp); err != nil {
				t.Fatal(err)
			}
			out := map[string][]byte{}
			for _, o := range resp.Objects {
				b, _ := json.Marshal(o)
				out[o.Kind()+" "+o.Name()] = b
			}
			return out
		}
		t.Fatalf("no case %s", name)
		return nil
	}
	dual, v4 := byName("dual-stack"), byName("located")
	pools, peers := map[string]metallbv1beta1.IPAddressPool{}, map[string]metallbv1beta2.BGPPeer{}
	for id, b := range dual {
		switch kind, name, _ := strings.Cut(id, " "); kind {
		case "IPAddressPool":
			var p metallbv1beta1.IPAddressPool
			strict(t, b, &p)
			pools[name] = p
		case "BGPPeer":
			var p metallbv1beta2.BGPPeer
			strict(t, b, &p)
			peers[name] = p
		case "BGPAdvertisement":
			var a metallbv1beta1.BGPAdvertisement
			strict(t, b, &a)
		}
	}
	for id, b := range v4 {
		if strings.HasPrefix(id, "BGPPeer ") || strings.HasPrefix(id, "Secret ") {
			if !bytes.Equal(dual[id], b) {
				t.Errorf("%s changed with IPv6:\n%s\n%s", id, dual[id], b)
			}
		} else if dual[id] == nil {
			t.Errorf("%s is gone with IPv6", id)
		}
	}
	if got := pools["default.nginx"].Spec.Addresses; !reflect.DeepEqual(got, []string{"145.40.1.5/32", "2604:1380:4641:c500::5/128"}) {
		t.Errorf("dual-stack pool addresses %v", got)
	}
	if got := pools["shared.145.40.1.7"].Spec.Addresses; !reflect.DeepEqual(got, []string{"145.40.1.7/32", "2604:1380:4641:c500::7/128"}) {
		t.Errorf("shared dual-stack pool addresses %v", got)
	}
	if got := pools["default.v6-only"].Spec.Addresses; !reflect.DeepEqual(got, []string{"2604:1380:4641:c500::8/128"}) {
		t.Errorf("IPv6-only pool addresses %v", got)
	}
	p, ok := peers["worker-1-0-v6"]
	if !ok || p.Spec.Address != "fc00::e" || p.Spec.SrcAddress != "2604:1380:4641:c500::1" || p.Spec.MyASN != 65000 || p.Spec.ASN != 65530 ||
		p.Spec.PasswordSecret.Name != "equinix-metal-bgp-password" || p.Spec.Password != "" || p.Spec.DualStackAddressFamily ||
		len(p.Spec.NodeSelectors) != 1 || p.Spec.NodeSelectors[0].MatchLabels["kubernetes.io/hostname"] != "worker-1" {
		t.Errorf("peer worker-1-0-v6 = %+v", p.Spec)
	}
	if len(peers) != 10 {
		t.Errorf("%d peers, want 6 IPv4 and 4 IPv6 (worker-3 has no IPv6 session)", len(peers))
	}
}
