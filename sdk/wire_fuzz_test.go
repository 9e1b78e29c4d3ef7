package sdk

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// wireRequestSeeds are requests of every shape the host sends: empty, with
// empty lists, and full (both families, every field set).
var wireRequestSeeds = []GenerateRequest{
	{},
	{APIVersion: APIVersion, Kind: KindGenerateRequest, Services: []Service{}, Nodes: []Node{{Name: "n", Peers: []Peer{}}}},
	{
		APIVersion: APIVersion, Kind: KindGenerateRequest, MemoryLimitBytes: 64 << 20,
		Options: Options{Namespace: "metallb-system", ConfigMap: "config", Params: map[string]string{"bgpType": "frr", "a": ""}},
		Services: []Service{
			{Namespace: "default", Name: "web", UID: "u1", IPs: []string{"145.40.1.5", "2604:1380::1"},
				Ports:       []Port{{Name: "http", Protocol: "TCP", Port: 80}, {Protocol: "UDP", Port: 53}},
				Annotations: map[string]string{"metallb.io/allow-shared-ip": "dns", "x": "ünï \u2028"}, SharingKey: "dns",
				Locations: []AddressLocation{{IP: "145.40.1.5", Metro: "sv"}, {IP: "2604:1380::1", Facility: "da11"}}},
			{Name: "no-ips", IPs: []string{}},
		},
		Nodes: []Node{{Name: "w1", Labels: map[string]string{"kubernetes.io/hostname": "w1"}, LocalASN: 65000,
			SourceIP: "10.0.0.1", SourceIPv6: "2604:1380:4641:c500::1",
			Peers: []Peer{{ASN: 65530, IP: "169.254.255.1", Password: "pw", Multihop: true}, {ASN: 65530, IP: "fc00::e"}}}},
		Annotations: AnnotationTemplates{LocalASN: "metal.equinix.com/bgp-peers-{{n}}-node-asn", PeerASN: "b/{{n}}", PeerIP: "c/{{n}}", SrcIP: "d/{{n}}", BGPPass: "e/{{n}}"},
		Existing:    []Object{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "config"}, "data": map[string]any{"n": json.Number("1e3")}}},
	},
}

// FuzzDecodeGenerateRequest fuzzes the guest's side of the request: the
// bytes a module's glue decodes (DecodeGenerateRequest). It never panics;
// a request it accepts re-encodes (EncodeGenerateRequest, the host's
// encoder) to bytes that decode to the same request and that encode again
// to the same bytes; and, as the layout promises, that request is what the
// JSON round trip of it gives (when its strings are UTF-8, which JSON
// cannot carry otherwise).
func FuzzDecodeGenerateRequest(f *testing.F) {
	for _, req := range wireRequestSeeds {
		b, err := EncodeGenerateRequest(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(wireMagic))
	f.Add([]byte(`{"apiVersion":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeGenerateRequest(b)
		if err != nil {
			return
		}
		b2, err := EncodeGenerateRequest(req)
		if err != nil {
			t.Fatalf("a decoded request does not encode: %v\n%#v", err, req)
		}
		req2, err := DecodeGenerateRequest(b2)
		if err != nil {
			t.Fatalf("a re-encoded request does not decode: %v\n%#v", err, req)
		}
		if !reflect.DeepEqual(req2, req) {
			t.Fatalf("round trip\n got %#v\nwant %#v", req2, req)
		}
		if b3, err := EncodeGenerateRequest(req2); err != nil || !bytes.Equal(b3, b2) {
			t.Fatalf("encoding is not stable: %v\n%q\n%q", err, b2, b3)
		}
		if !validUTF8(reflect.ValueOf(req)) {
			return
		}
		j, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var want GenerateRequest
		if err := decode(j, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(req, want) {
			t.Fatalf("binary and JSON differ\nbinary %#v\n  JSON %#v", req, want)
		}
	})
}

// validUTF8 reports whether every string in v, keys too, is valid UTF-8.
func validUTF8(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return utf8.ValidString(v.String())
	case reflect.Struct:
		for i := range v.NumField() {
			if !validUTF8(v.Field(i)) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if !validUTF8(v.Index(i)) {
				return false
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if !validUTF8(it.Key()) || !validUTF8(it.Value()) {
				return false
			}
		}
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			return validUTF8(v.Elem())
		}
	}
	return true
}
