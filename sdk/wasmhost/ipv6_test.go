package wasmhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// dualStack is a request with IPv6 everywhere ABI version 5 allows it,
// and ipv4Only what a module of version 4 or older gets of it.
func dualStack() sdk.GenerateRequest {
	return sdk.GenerateRequest{
		Services: []sdk.Service{
			{Namespace: "default", Name: "dual", UID: "u1", IPs: []string{"145.40.1.5", "2604:1380:4641:c500::3"},
				Ports:     []sdk.Port{{Protocol: "TCP", Port: 80}},
				Locations: []sdk.AddressLocation{{IP: "145.40.1.5", Metro: "sv"}, {IP: "2604:1380:4641:c500::3", Metro: "sv"}}},
			{Namespace: "default", Name: "v6-only", UID: "u2", IPs: []string{"2604:1380:4641:c500::4"},
				Locations: []sdk.AddressLocation{{IP: "2604:1380:4641:c500::4", Metro: "sv"}}},
			{Namespace: "default", Name: "v4", UID: "u3", IPs: []string{"145.40.1.6"}},
			{Namespace: "default", Name: "mapped", UID: "u4", IPs: []string{"::ffff:145.40.1.7"}},
		},
		Nodes: []sdk.Node{
			{Name: "worker-1", LocalASN: 65000, SourceIP: "10.0.0.1", SourceIPv6: "2604:1380:4641:c500::1", Peers: []sdk.Peer{
				{ASN: 65530, IP: "169.254.255.1", Password: fakePassword}, {ASN: 65530, IP: "169.254.255.2", Password: fakePassword},
				{ASN: 65530, IP: "fc00::e", Password: fakePassword}, {ASN: 65530, IP: "fc00::f", Password: fakePassword}}},
			{Name: "worker-2", LocalASN: 65000, SourceIP: "10.0.0.2", Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1"}}},
			{Name: "v6-peers-only", LocalASN: 65000, SourceIP: "10.0.0.3", SourceIPv6: "2604:1380:4641:c500::9",
				Peers: []sdk.Peer{{ASN: 65530, IP: "fc00::e"}}},
		},
		Annotations: sdk.AnnotationTemplates{LocalASN: "metal.equinix.com/bgp-peers-{{n}}-node-asn"},
	}
}

func ipv4Only() sdk.GenerateRequest {
	return sdk.GenerateRequest{
		Services: []sdk.Service{
			{Namespace: "default", Name: "dual", UID: "u1", IPs: []string{"145.40.1.5"},
				Ports: []sdk.Port{{Protocol: "TCP", Port: 80}}, Locations: []sdk.AddressLocation{{IP: "145.40.1.5", Metro: "sv"}}},
			{Namespace: "default", Name: "v4", UID: "u3", IPs: []string{"145.40.1.6"}},
			{Namespace: "default", Name: "mapped", UID: "u4", IPs: []string{"::ffff:145.40.1.7"}},
		},
		Nodes: []sdk.Node{
			{Name: "worker-1", LocalASN: 65000, SourceIP: "10.0.0.1", Peers: []sdk.Peer{
				{ASN: 65530, IP: "169.254.255.1", Password: fakePassword}, {ASN: 65530, IP: "169.254.255.2", Password: fakePassword}}},
			{Name: "worker-2", LocalASN: 65000, SourceIP: "10.0.0.2", Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1"}}},
			{Name: "v6-peers-only", LocalASN: 65000, SourceIP: "10.0.0.3", Peers: []sdk.Peer{}},
		},
		Annotations: sdk.AnnotationTemplates{LocalASN: "metal.equinix.com/bgp-peers-{{n}}-node-asn"},
	}
}

func TestWithoutIPv6(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   sdk.GenerateRequest
		want sdk.GenerateRequest
		asIs bool // the very request back: nothing to leave out
	}{
		{name: "IPv4 only", in: ipv4Only(), want: ipv4Only(), asIs: true},
		{name: "empty", in: sdk.GenerateRequest{}, want: sdk.GenerateRequest{}, asIs: true},
		{name: "dual stack", in: dualStack(), want: ipv4Only()},
		{name: "not an address stays, as before",
			in:   sdk.GenerateRequest{Services: []sdk.Service{{Name: "odd", IPs: []string{"nope", "2604:1380::1"}}}},
			want: sdk.GenerateRequest{Services: []sdk.Service{{Name: "odd", IPs: []string{"nope"}}}}},
		{name: "an IPv6 location of an IPv4 address's Service",
			in: sdk.GenerateRequest{Services: []sdk.Service{{Name: "s", IPs: []string{"145.40.1.5"},
				Locations: []sdk.AddressLocation{{IP: "2604:1380::1", Metro: "sv"}}}}},
			want: sdk.GenerateRequest{Services: []sdk.Service{{Name: "s", IPs: []string{"145.40.1.5"}, Locations: []sdk.AddressLocation{}}}}},
		{name: "a node with SourceIPv6 but no IPv6 peer",
			in:   sdk.GenerateRequest{Nodes: []sdk.Node{{Name: "n", SourceIPv6: "2604:1380::1", Peers: []sdk.Peer{{IP: "169.254.255.1"}}}}},
			want: sdk.GenerateRequest{Nodes: []sdk.Node{{Name: "n", Peers: []sdk.Peer{{IP: "169.254.255.1"}}}}}},
		{name: "nil peers stay nil",
			in:   sdk.GenerateRequest{Nodes: []sdk.Node{{Name: "n", SourceIPv6: "2604:1380::1"}}},
			want: sdk.GenerateRequest{Nodes: []sdk.Node{{Name: "n"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.in)
			got := wasmhost.WithoutIPv6(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("withoutIPv6\n got %+v\nwant %+v", got, tc.want)
			}
			if after, _ := json.Marshal(tc.in); !bytes.Equal(before, after) {
				t.Errorf("the caller's request changed:\n%s\n%s", before, after)
			}
			if tc.asIs && len(tc.in.Services) > 0 && &got.Services[0] != &tc.in.Services[0] {
				t.Error("an IPv4-only request was copied")
			}
		})
	}
}

// TestOlderModulesGetTheRequestWithoutIPv6: a module of ABI version 1 to 4
// gets, for a dual-stack cluster, byte for byte what it gets for the same
// cluster without IPv6 (in the encoding of its version); one of version 5
// gets all of it.
func TestOlderModulesGetTheRequestWithoutIPv6(t *testing.T) {
	v4 := ipv4Only()
	for abi, encode := range map[uint32]func(sdk.GenerateRequest) ([]byte, error){
		1: func(r sdk.GenerateRequest) ([]byte, error) { return json.Marshal(wasmhost.WithoutLocations(r)) },
		2: sdk.EncodeGenerateRequestV2,
		3: sdk.EncodeGenerateRequestV2,
		4: sdk.EncodeGenerateRequestV4,
	} {
		want, err := encode(v4)
		if err != nil {
			t.Fatal(err)
		}
		got, err := wasmhost.EncodeRequest(abi, dualStack())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("ABI version %d:\n got %q\nwant %q", abi, got, want)
		}
		if abi == 1 && bytes.Contains(got, []byte("sourceIPv6")) {
			t.Errorf("ABI version 1 JSON names sourceIPv6: %s", got)
		}
	}
	b, err := wasmhost.EncodeRequest(sdk.ABIVersion, dualStack())
	if err != nil {
		t.Fatal(err)
	}
	got, err := sdk.DecodeGenerateRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(dualStack())
	var want sdk.GenerateRequest
	if err := json.Unmarshal(j, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ABI version %d\n got %+v\nwant %+v", sdk.ABIVersion, got, want)
	}
}

// TestOlderModuleOnADualStackCluster: a module of ABI version 2 runs on a
// dual-stack request, and its output is validated against the whole
// request (the nodes it got are all of the request's).
func TestOlderModuleOnADualStackCluster(t *testing.T) {
	m := load(t, hostile(t), "abi2")
	resp, err := m.Generate(context.Background(), dualStack())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Objects) != 1 || resp.Objects[0].Name() != "fine" {
		t.Fatalf("objects = %v", resp.Objects)
	}
}
