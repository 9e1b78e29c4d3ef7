package wasmhost

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// requestSeeds are requests as JSON, the form authors and sdktest see.
var requestSeeds = []string{
	`{}`,
	`{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateRequest","options":{},"services":[],"nodes":[]}`,
	`{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateRequest","memoryLimitBytes":67108864,
	  "options":{"namespace":"metallb-system","params":{"bgpType":"frr"}},
	  "services":[{"namespace":"default","name":"web","uid":"u1","ips":["145.40.1.5","2604:1380::1"],
	    "ports":[{"name":"http","protocol":"TCP","port":80}],"annotations":{"metallb.io/allow-shared-ip":"k"},"sharingKey":"k",
	    "locations":[{"ip":"145.40.1.5","metro":"sv"},{"ip":"2604:1380::1","facility":"da11"}]},
	    {"namespace":"default","name":"v6","uid":"u2","ips":["2604:1380::2"]}],
	  "nodes":[{"name":"w1","labels":{"a":"b"},"localASN":65000,"sourceIP":"10.0.0.1","sourceIPv6":"fc00::1",
	    "peers":[{"asn":65530,"ip":"169.254.255.1","password":"pw","multihop":true},{"asn":65530,"ip":"fc00::e"}]}],
	  "annotations":{"localASN":"a/{{n}}","peerASN":"b/{{n}}","peerIP":"c/{{n}}","srcIP":"d/{{n}}","bgpPass":"e/{{n}}"},
	  "existing":[{"apiVersion":"v1","kind":"ConfigMap","data":{"n":12345678901234567890}}]}`,
	`{"memoryLimitBytes":-1,"services":[{"ips":null,"ports":[{"port":-1}]}],"existing":[]}`,
}

// FuzzEncodeRequest fuzzes the host's side of the request: a request (as
// JSON, decoded as the SDK decodes it) encoded by encodeRequest for a
// module of each ABI version. It never fails or panics; what it encodes
// for a module of this SDK, the guest's decoder (sdk.DecodeGenerateRequest)
// decodes to the request's JSON round trip; and what a module of ABI
// version 1 gets (JSON) carries no IPv6, multihop or location, which that
// module does not know.
func FuzzEncodeRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		req, ok := jsonRequest(in)
		if !ok {
			return
		}
		want, ok := jsonRequest(mustJSON(t, req))
		if !ok {
			t.Fatalf("the JSON of %#v does not decode", req)
		}
		want.MemoryLimitBytes = max(want.MemoryLimitBytes, 0) // the encoder sends no negative limit
		for abi := uint32(1); abi <= sdk.ABIVersion; abi++ {
			b, err := encodeRequest(abi, req)
			if err != nil {
				t.Fatalf("ABI %d: %v", abi, err)
			}
			switch abi {
			case sdk.ABIVersion:
				got, err := sdk.DecodeGenerateRequest(b)
				if err != nil {
					t.Fatalf("the guest refuses the host's request: %v\n%q", err, b)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("host to guest\n got %#v\nwant %#v", got, want)
				}
			case 1:
				old, ok := jsonRequest(b)
				if !ok {
					t.Fatalf("ABI 1: not a JSON request: %s", b)
				}
				for _, s := range old.Services {
					if len(s.Locations) > 0 || slices.ContainsFunc(s.IPs, sdk.IsIPv6) {
						t.Fatalf("ABI 1: Service %+v has locations or IPv6", s)
					}
				}
				for _, n := range old.Nodes {
					if n.SourceIPv6 != "" || slices.ContainsFunc(n.Peers, func(p sdk.Peer) bool { return p.Multihop || sdk.IsIPv6(p.IP) }) {
						t.Fatalf("ABI 1: node %+v has IPv6 or a multihop peer", n)
					}
				}
			}
		}
	})
}

// jsonRequest decodes a request as the SDK decodes its JSON (numbers as
// json.Number, nothing after the document).
func jsonRequest(b []byte) (sdk.GenerateRequest, bool) {
	var req sdk.GenerateRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&req) != nil || dec.More() {
		return sdk.GenerateRequest{}, false
	}
	return req, true
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzWireResponseMatchesJSON: a binary response the host accepts from a
// module (decodeWireResponse) is the tree its JSON decodes to with the
// host's JSON decoder (decodeResponse), so the two ABI generations of
// modules cannot be told apart downstream.
func FuzzWireResponseMatchesJSON(f *testing.F) {
	addWireSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decodeWireResponse(in)
		if err != nil {
			return
		}
		js := mustJSON(t, got)
		want, err := decodeResponse(js)
		if err != nil {
			t.Fatalf("the JSON of an accepted binary response is refused: %v\n%s", err, js)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("binary\n got %#v\nJSON %#v", got, want)
		}
	})
}
