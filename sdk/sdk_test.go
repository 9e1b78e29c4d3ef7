package sdk_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
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
			{ASN: 65530, IP: "169.254.255.2", Password: "b", Multihop: true}, {ASN: 65531, IP: "169.254.255.1", Password: "a"}}},
			map[string]string{
				"metal.equinix.com/bgp-peers-0-node-asn": "65000", "metal.equinix.com/bgp-peers-0-peer-asn": "65531",
				"metal.equinix.com/bgp-peers-0-peer-ip": "169.254.255.1", "metal.equinix.com/bgp-peers-0-src-ip": "10.0.0.1",
				"metal.equinix.com/bgp-peers-0-bgp-pass": "YQ==", "metal.equinix.com/bgp-peers-0-peer-multi-hop": "false",
				"metal.equinix.com/bgp-peers-1-node-asn": "65000", "metal.equinix.com/bgp-peers-1-peer-asn": "65530",
				"metal.equinix.com/bgp-peers-1-peer-ip": "169.254.255.2", "metal.equinix.com/bgp-peers-1-src-ip": "10.0.0.1",
				"metal.equinix.com/bgp-peers-1-bgp-pass": "Yg==", "metal.equinix.com/bgp-peers-1-peer-multi-hop": "true",
			}},
		{"IPv6 peers left out, the IPv4 indexes as without them", templates, sdk.Node{Name: "n", LocalASN: 65000, SourceIP: "10.0.0.1",
			SourceIPv6: "2604:1380:4641:c500::1", Peers: []sdk.Peer{
				{ASN: 65530, IP: "fc00::e", Password: "c"}, {ASN: 65530, IP: "169.254.255.1", Password: "a"}, {ASN: 65530, IP: "::1", Password: "d"}}},
			map[string]string{
				"metal.equinix.com/bgp-peers-0-node-asn": "65000", "metal.equinix.com/bgp-peers-0-peer-asn": "65530",
				"metal.equinix.com/bgp-peers-0-peer-ip": "169.254.255.1", "metal.equinix.com/bgp-peers-0-src-ip": "10.0.0.1",
				"metal.equinix.com/bgp-peers-0-bgp-pass": "YQ==", "metal.equinix.com/bgp-peers-0-peer-multi-hop": "false",
			}},
		{"no peers, no annotations", templates, sdk.Node{Name: "n", LocalASN: 65000}, map[string]string{}},
		{"custom templates, one left empty, no password; no multihop name beside a peer IP not ending peer-ip",
			sdk.AnnotationTemplates{PeerIP: "x.io/{{n}}.ip", BGPPass: "x.io/pass-{{n}}"},
			sdk.Node{Peers: []sdk.Peer{{IP: "192.0.2.1", Multihop: true}}},
			map[string]string{"x.io/0.ip": "192.0.2.1", "x.io/pass-0": ""}},
		{"custom templates ending peer-ip: multihop beside them", sdk.AnnotationTemplates{PeerIP: "x.io/p{{n}}-peer-ip"},
			sdk.Node{Peers: []sdk.Peer{{IP: "192.0.2.1", Multihop: true}}},
			map[string]string{"x.io/p0-peer-ip": "192.0.2.1", "x.io/p0-peer-multi-hop": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sdk.RenderBGPAnnotations(tc.tmpl, tc.node); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestIPv6Annotations: the IPv6 peers' annotations have names of their
// own ("v6-" before the index), the IPv6 source, and are the core's (a
// module may not write them); the IPv4 matcher does not take them.
func TestIPv6Annotations(t *testing.T) {
	n := sdk.Node{Name: "n", LocalASN: 65000, SourceIP: "10.0.0.1", SourceIPv6: "2604:1380:4641:c500::1", Peers: []sdk.Peer{
		{ASN: 65530, IP: "fc00::f", Password: "b", Multihop: true}, {ASN: 65530, IP: "169.254.255.1", Password: "a"}, {ASN: 65530, IP: "fc00::e", Password: "a", Multihop: true}}}
	want := map[string]string{
		"metal.equinix.com/bgp-peers-v6-0-node-asn": "65000", "metal.equinix.com/bgp-peers-v6-0-peer-asn": "65530",
		"metal.equinix.com/bgp-peers-v6-0-peer-ip": "fc00::e", "metal.equinix.com/bgp-peers-v6-0-src-ip": "2604:1380:4641:c500::1",
		"metal.equinix.com/bgp-peers-v6-0-bgp-pass": "YQ==", "metal.equinix.com/bgp-peers-v6-0-peer-multi-hop": "true",
		"metal.equinix.com/bgp-peers-v6-1-node-asn": "65000", "metal.equinix.com/bgp-peers-v6-1-peer-asn": "65530",
		"metal.equinix.com/bgp-peers-v6-1-peer-ip": "fc00::f", "metal.equinix.com/bgp-peers-v6-1-src-ip": "2604:1380:4641:c500::1",
		"metal.equinix.com/bgp-peers-v6-1-bgp-pass": "Yg==", "metal.equinix.com/bgp-peers-v6-1-peer-multi-hop": "true",
	}
	if got := sdk.RenderBGPAnnotationsIPv6(templates, n); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if got := templates.IPv6().PeerIP; got != "metal.equinix.com/bgp-peers-v6-{{n}}-peer-ip" {
		t.Errorf("IPv6 peer IP template %q", got)
	}
	for name, want := range map[string][2]bool{ // IsPeerAnnotation, IsCoreAnnotation
		"metal.equinix.com/bgp-peers-v6-1-peer-ip":        {false, true},
		"metal.equinix.com/bgp-peers-1-peer-ip":           {true, true},
		"metal.equinix.com/bgp-peers-v7-1-peer-ip":        {false, false},
		"metal.equinix.com/bgp-peers-1-peer-multi-hop":    {true, true},
		"metal.equinix.com/bgp-peers-v6-0-peer-multi-hop": {false, true},
	} {
		if got := [2]bool{templates.IsPeerAnnotation(name), templates.IsCoreAnnotation(name)}; got != want {
			t.Errorf("%s: IsPeerAnnotation, IsCoreAnnotation = %v, want %v", name, got, want)
		}
	}
	if got := (sdk.AnnotationTemplates{PeerIP: "x.io/ip"}).IPv6(); got != (sdk.AnnotationTemplates{}) {
		t.Errorf("a template without {{n}} names an IPv6 annotation: %+v", got)
	}
}

func TestIsIPv6(t *testing.T) {
	for ip, want := range map[string]bool{
		"2604:1380:4641:c500::3": true, "fc00::e": true, "::1": true, "fe80::1%eth0": true,
		"145.40.1.5": false, "::ffff:145.40.1.5": false, "": false, "not an address": false, "2604:1380::/64": false,
	} {
		if got := sdk.IsIPv6(ip); got != want {
			t.Errorf("IsIPv6(%q) = %v, want %v", ip, got, want)
		}
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
		name  string
		input []byte
		gen   func(sdk.GenerateRequest) (sdk.GenerateResponse, error)
		want  string
		// wantErr is a regular expression the error must match.
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
			"", `^module panicked in sdk_test\.TestHandleGenerate\.func\d+ \(sdk_test\.go:\d+\): boom$`},
		{"wrong envelope", []byte(`{"apiVersion":"lb.metal.equinix.com/v9","kind":"GenerateRequest"}`),
			nil, "", "this module understands lb.metal.equinix.com/v1alpha1 GenerateRequest"},
		{"trailing data", append(generateRequest(t, sdk.GenerateRequest{}), []byte(` {}`)...),
			nil, "", "trailing data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := sdk.Module{Name: "t", Describe: func(sdk.Options) (sdk.Description, error) { return sdk.Description{}, nil }, Generate: tc.gen}
			out, err := m.HandleGenerate(tc.input)
			if tc.wantErr != "" {
				if err == nil || !regexp.MustCompile(tc.wantErr).MatchString(err.Error()) {
					t.Fatalf("got %v, want an error matching %q", err, tc.wantErr)
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

// here returns the line it is called from.
func here() int {
	_, _, line, _ := runtime.Caller(1)
	return line
}

// The panics of TestPanicNamesTheFrame, each setting *line to the line that
// panics: named functions, so that the test knows their names.
func assignToNilMap(line *int) {
	var m map[string]bool
	*line = here() + 1
	m["x"] = true
}

func indexOutOfRange(line *int) {
	var s []string
	i := 3
	*line = here() + 1
	_ = s[i]
}

func nilDereference(line *int) {
	var svc *sdk.Service
	*line = here() + 1
	_ = svc.Name
}

func explicitPanic(line *int) {
	*line = here() + 1
	panic(fmt.Errorf("no %s", "peers"))
}

// TestPanicNamesTheFrame: the error of a panic names the function and
// file:line of the code that panicked, past the runtime's own frames, so an
// author finds the bug from the error alone.
func TestPanicNamesTheFrame(t *testing.T) {
	for _, tc := range []struct {
		fn   func(*int)
		name string
		msg  string
	}{
		{assignToNilMap, "assignToNilMap", "assignment to entry in nil map"},
		{indexOutOfRange, "indexOutOfRange", "runtime error: index out of range [3] with length 0"},
		{nilDereference, "nilDereference", "runtime error: invalid memory address or nil pointer dereference"},
		{explicitPanic, "explicitPanic", "no peers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var line int
			m := sdk.Module{Name: "t", Describe: func(sdk.Options) (sdk.Description, error) { return sdk.Description{}, nil },
				Generate: func(sdk.GenerateRequest) (sdk.GenerateResponse, error) {
					tc.fn(&line)
					return sdk.GenerateResponse{}, nil
				}}
			_, err := m.HandleGenerate(generateRequest(t, sdk.GenerateRequest{}))
			want := fmt.Sprintf("module panicked in sdk_test.%s (sdk_test.go:%d): %s", tc.name, line, tc.msg)
			if err == nil || err.Error() != want {
				t.Errorf("got  %v\nwant %s", err, want)
			}
		})
	}
}

// TestBuiltModulePanicNamesTheFrame: compiled for wasip1 with -trimpath, as
// sdktest and authors build, the panic's location survives the guest and
// the host whole, in the error sdktest returns and the CCM puts in its
// Event.
func TestBuiltModulePanicNamesTheFrame(t *testing.T) {
	src, err := os.ReadFile("testdata/panics/main.go")
	if err != nil {
		t.Fatal(err)
	}
	line := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(l, "// panics here") {
			line = i + 1
		}
	}
	if line == 0 {
		t.Fatal("testdata/panics/main.go has no line marked // panics here")
	}
	wasm := sdktest.Build(t, "testdata/panics")
	_, err = sdktest.Generate(t, wasm, sdk.Options{}, sdktest.Snapshot(1, 0))
	want := fmt.Sprintf("ccm_lb_generate failed: module panicked in main.generate (main.go:%d): assignment to entry in nil map", line)
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("got  %v\nwant an error ending in %s", err, want)
	}
	t.Logf("the error: %v", err)
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
