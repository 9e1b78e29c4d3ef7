package sdk_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

var templates = sdk.AnnotationTemplates{
	LocalASN: "metal.equinix.com/bgp-peers-{{n}}-node-asn",
	PeerASN:  "metal.equinix.com/bgp-peers-{{n}}-peer-asn",
	PeerIP:   "metal.equinix.com/bgp-peers-{{n}}-peer-ip",
	SrcIP:    "metal.equinix.com/bgp-peers-{{n}}-src-ip",
	BGPPass:  "metal.equinix.com/bgp-peers-{{n}}-bgp-pass",
}

func TestRenderBGPAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name string
		tmpl sdk.AnnotationTemplates
		node sdk.Node
		want map[string]string
	}{
		{"peers indexed by sorted IP, password base64", templates, sdk.Node{Name: "n", LocalASN: 65000, SourceIP: "10.0.0.1", Peers: []sdk.Peer{
			{ASN: 65530, IP: "169.254.255.2", Password: "b"}, {ASN: 65531, IP: "169.254.255.1", Password: "a"}}},
			map[string]string{
				"metal.equinix.com/bgp-peers-0-node-asn": "65000", "metal.equinix.com/bgp-peers-0-peer-asn": "65531",
				"metal.equinix.com/bgp-peers-0-peer-ip": "169.254.255.1", "metal.equinix.com/bgp-peers-0-src-ip": "10.0.0.1",
				"metal.equinix.com/bgp-peers-0-bgp-pass": "YQ==",
				"metal.equinix.com/bgp-peers-1-node-asn": "65000", "metal.equinix.com/bgp-peers-1-peer-asn": "65530",
				"metal.equinix.com/bgp-peers-1-peer-ip": "169.254.255.2", "metal.equinix.com/bgp-peers-1-src-ip": "10.0.0.1",
				"metal.equinix.com/bgp-peers-1-bgp-pass": "Yg==",
			}},
		{"no peers, no annotations", templates, sdk.Node{Name: "n", LocalASN: 65000}, map[string]string{}},
		{"custom templates, one left empty, no password", sdk.AnnotationTemplates{PeerIP: "x.io/{{n}}.ip", BGPPass: "x.io/pass-{{n}}"},
			sdk.Node{Peers: []sdk.Peer{{IP: "192.0.2.1"}}},
			map[string]string{"x.io/0.ip": "192.0.2.1", "x.io/pass-0": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sdk.RenderBGPAnnotations(tc.tmpl, tc.node); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestSecretNeverFormats(t *testing.T) {
	p := sdk.Peer{ASN: 1, IP: "192.0.2.1", Password: "hunter2"}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(verb, p); strings.Contains(s, "hunter2") {
			t.Errorf("%s prints the password: %s", verb, s)
		}
	}
	b, _ := json.Marshal(p)
	if !strings.Contains(string(b), `"password":"hunter2"`) {
		t.Errorf("JSON must carry the password across the ABI: %s", b)
	}
}

func generateRequest(t *testing.T, req sdk.GenerateRequest) []byte {
	t.Helper()
	req.APIVersion, req.Kind = sdk.APIVersion, sdk.KindGenerateRequest
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandleGenerate(t *testing.T) {
	obj := func(kind, ns, name string) sdk.Object {
		return sdk.Object{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": ns}}
	}
	for _, tc := range []struct {
		name    string
		input   []byte
		gen     func(sdk.GenerateRequest) (sdk.GenerateResponse, error)
		want    string
		wantErr string
	}{
		{"objects sorted by apiVersion, kind, namespace, name", generateRequest(t, sdk.GenerateRequest{}),
			func(sdk.GenerateRequest) (sdk.GenerateResponse, error) {
				return sdk.GenerateResponse{Objects: []sdk.Object{obj("Secret", "a", "x"), obj("ConfigMap", "b", "a"), obj("ConfigMap", "a", "b")}}, nil
			},
			`{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[` +
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"a"}},` +
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"b"}},` +
				`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x","namespace":"a"}}]}`, ""},
		{"nothing is an empty list", generateRequest(t, sdk.GenerateRequest{}),
			func(sdk.GenerateRequest) (sdk.GenerateResponse, error) { return sdk.GenerateResponse{}, nil },
			`{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[]}`, ""},
		{"handler error", generateRequest(t, sdk.GenerateRequest{}),
			func(sdk.GenerateRequest) (sdk.GenerateResponse, error) {
				return sdk.GenerateResponse{}, fmt.Errorf("no peers")
			},
			"", "no peers"},
		{"handler panic becomes an error", generateRequest(t, sdk.GenerateRequest{}),
			func(sdk.GenerateRequest) (sdk.GenerateResponse, error) { panic("boom") },
			"", "module panicked: boom"},
		{"wrong envelope", []byte(`{"apiVersion":"lb.metal.equinix.com/v9","kind":"GenerateRequest"}`),
			nil, "", "this module understands lb.metal.equinix.com/v1alpha1 GenerateRequest"},
		{"trailing data", append(generateRequest(t, sdk.GenerateRequest{}), []byte(` {}`)...),
			nil, "", "trailing data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := sdk.Module{Name: "t", Describe: func(sdk.Options) (sdk.Description, error) { return sdk.Description{}, nil }, Generate: tc.gen}
			out, err := m.HandleGenerate(tc.input)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
		})
	}
}

func TestHandleDescribeFillsIdentity(t *testing.T) {
	m := sdk.Module{Name: "mine", Version: "1.2.3",
		Describe: func(o sdk.Options) (sdk.Description, error) {
			return sdk.Description{Emits: []sdk.ObjectKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: o.Namespace}}}, nil
		},
		Generate: func(sdk.GenerateRequest) (sdk.GenerateResponse, error) { return sdk.GenerateResponse{}, nil }}
	out, err := m.HandleDescribe([]byte(`{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"DescribeRequest","options":{"namespace":"lb"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"DescribeResponse","name":"mine","version":"1.2.3","emits":[{"apiVersion":"v1","kind":"ConfigMap","namespace":"lb"}]}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestObjectFromKeepsLargeIntegersExact(t *testing.T) {
	type spec struct {
		ASN uint64 `json:"asn"`
	}
	o, err := sdk.ObjectFrom(map[string]any{"apiVersion": "v1", "kind": "X", "spec": spec{ASN: 4294967295123}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(o)
	if !strings.Contains(string(b), `"asn":4294967295123`) {
		t.Errorf("got %s", b)
	}
}
