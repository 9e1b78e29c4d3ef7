package wasmhost

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// stdDecode is what decodeResponse replaced; it stays as the reference the
// tests compare with.
func stdDecode(b []byte) (sdk.GenerateResponse, error) {
	var resp sdk.GenerateResponse
	return resp, decodeStrict(b, &resp)
}

var responseSeeds = []string{
	`{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"b","labels":{"x":"y"}},"data":{"config":"peers:\n- 1\n"}}]}`,
	`{"apiVersion":"a","kind":"b","objects":[{"spec":{"port":179,"big":9007199254740993,"f":1.5e3,"neg":-0,"on":true,"off":false,"nil":null,"list":[1,"two",[],{}]}}],"nodeAnnotations":{"n1":{"k":"v"}},"warnings":["w\u00e9\ud83d\ude00"]}`,
	`{"objects":[]}`,
	`{"objects":null,"warnings":null,"nodeAnnotations":null,"kind":null}`,
	`{"objects":[null]}`,
	`{"objects":[{"a\"b":"c\\d","\u0061":"\t"}]}`,
	` { "objects" : [ { } ] } `,
}

// TestDecodeResponseMatchesEncodingJSON: on documents both accept, the two
// decoders agree exactly, numbers included.
func TestDecodeResponseMatchesEncodingJSON(t *testing.T) {
	for _, in := range responseSeeds {
		got, err := decodeResponse([]byte(in))
		if err != nil {
			t.Fatalf("decodeResponse(%s): %v", in, err)
		}
		want, err := stdDecode([]byte(in))
		if err != nil {
			t.Fatalf("encoding/json(%s): %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decodeResponse(%s)\n got %#v\nwant %#v", in, got, want)
		}
	}
}

func TestDecodeResponseRejects(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`[]`, "the response is an array, want an object"},
		{`null`, "want an object"},
		{``, "unexpected EOF"},
		{`{"objects":[1]}`, "objects[0] is a number, want an object"},
		{`{"objects":{}}`, `"objects" is an object, want an array`},
		{`{"kind":1}`, `"kind" is a number, want a string`},
		{`{"extra":1}`, `unknown field "extra" in the response`},
		{`{"Kind":"x"}`, `unknown field "Kind"`},
		{`{"objects":[{"a":1,"a":2}]}`, "duplicate"},
		{`{"kind":"x"} {}`, "trailing data"},
		{`{"kind":"x"`, "unexpected EOF"},
		{`{"objects":[{"a":}]}`, "missing value after object name"},
		{"{\"kind\":\"\xff\"}", "invalid UTF-8"},
		{`{"warnings":[1]}`, `"warnings": json: cannot unmarshal number`},
		{`{"nodeAnnotations":{"n":{"k":1}}}`, `"nodeAnnotations": json: cannot unmarshal number`},
	} {
		_, err := decodeResponse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decodeResponse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// FuzzDecodeResponse: decodeResponse accepts nothing encoding/json rejects,
// and where both accept, they agree.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decodeResponse(in)
		if err != nil {
			return
		}
		want, err := stdDecode(in)
		if err != nil {
			t.Fatalf("decodeResponse accepted %q, which encoding/json rejects: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeResponse(%q)\n got %#v\nwant %#v", in, got, want)
		}
	})
}

// BenchmarkDecodeResponse1000 decodes the metallb-crd module's output for
// 1,000 Services (objects of the shape the module writes), with the
// decoder of each kind: the binary response of ABI version 3 and JSON.
func BenchmarkDecodeResponse1000(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[`)
	for i := range 1000 {
		if i > 0 {
			buf.WriteByte(',')
		}
		pool := map[string]any{
			"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
			"metadata": map[string]any{"name": "ns-0.svc-" + strings.Repeat("0", 4), "namespace": "metallb-system",
				"labels": map[string]any{"cloud-provider": "equinix-metal"}},
			"spec": map[string]any{"addresses": []any{"147.75.100.1/32"}, "autoAssign": false,
				"serviceAllocation": map[string]any{"namespaces": []any{"ns-0"}, "serviceSelectors": []any{
					map[string]any{"matchLabels": map[string]any{"metal.equinix.com/service": "svc"}}}}},
		}
		o, _ := json.Marshal(pool)
		buf.Write(o)
	}
	buf.WriteString(`]}`)
	js := buf.Bytes()
	resp, err := decodeResponse(js)
	if err != nil {
		b.Fatal(err)
	}
	wire, err := sdk.EncodeGenerateResponse(resp)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []struct {
		name string
		fn   func([]byte) (sdk.GenerateResponse, error)
		in   []byte
	}{{"wire", decodeWireResponse, wire}, {"jsontext", decodeResponse, js}, {"encoding-json", stdDecode, js}} {
		in := d.in
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.fn(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
