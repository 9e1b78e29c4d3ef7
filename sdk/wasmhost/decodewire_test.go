package wasmhost

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

type pair struct {
	A string `json:"a"`
	B int    `json:"b,omitempty"`
}

// wireResponses are what modules return, of every kind of value the SDK's
// encoder writes directly or as JSON.
var wireResponses = []sdk.GenerateResponse{
	{APIVersion: sdk.APIVersion, Kind: sdk.KindGenerateResponse, Objects: []sdk.Object{{
		"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
		"metadata": sdk.Fields{{Name: "name", Value: "pool"}, {Name: "namespace", Value: "metallb-system"},
			{Name: "labels", Value: map[string]string{"a": "b"}}},
		"spec": map[string]any{"addresses": []string{"147.75.1.1/32"}, "autoAssign": false, "on": true,
			"serviceAllocation": map[string]any{"namespaces": []any{"ns"}, "priority": 1}},
	}}},
	{Kind: "numbers", Objects: []sdk.Object{{
		"int": 179, "int32": int32(-7), "int64": int64(9007199254740993), "uint32": uint32(4294967295),
		"uint64": uint64(18446744073709551615), "zero": 0, "float": 1.5e3, "half": 0.5,
		"number": json.Number("12.50"), "list": []any{1, "two", []any{}, map[string]any{}, nil},
	}}},
	{Kind: "strings", Objects: []sdk.Object{{
		"quote\"and\\": "<tag> & \u2028 \t\n é 😀", "invalid": "a\xffb\xc0", "\xfename": "v", "": "",
		"typed": pair{A: "x"}, "typedList": []pair{{A: "y", B: 2}}, "nilMap": map[string]any(nil),
		"nilFields": sdk.Fields(nil), "nilStrings": []string(nil), "nilList": []any(nil),
		"nilStringMap": map[string]string(nil), "emptyFields": sdk.Fields{},
		"nested": sdk.Object{"deep": map[string]any{"deeper": sdk.Fields{{Name: "x", Value: []string{"y"}}}}},
	}}},
	{Objects: []sdk.Object{nil, {}},
		NodeAnnotations: map[string]map[string]string{"n1": {"k": "v", "k2": "\xff"}, "n2": nil, "n3": {}},
		Warnings:        []string{"careful", "w\xff"}},
	{Objects: []sdk.Object{}, Warnings: []string{}, NodeAnnotations: map[string]map[string]string{}},
	// Lists whose items take one byte each, with nothing after them: a
	// count bounded off by one refused them (found by FuzzDecodeWireResponse).
	{Warnings: []string{""}},
	{Warnings: []string{"", ""}},
}

// TestWireResponseMatchesJSON: the binary response decodes to exactly
// the tree the JSON of the same response decodes to.
func TestWireResponseMatchesJSON(t *testing.T) {
	for i, resp := range wireResponses {
		js, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		want, err := decodeResponse(js)
		if err != nil {
			t.Fatalf("%d: decodeResponse(%s): %v", i, js, err)
		}
		wire, err := sdk.EncodeGenerateResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeWireResponse(wire)
		if err != nil {
			t.Fatalf("%d: decodeWireResponse: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d: binary\n got %#v\nJSON %#v", i, got, want)
		}
	}
}

// TestDecodeWireResponseTruncated: every proper prefix of a response is
// refused, never read as a smaller response and never a panic.
func TestDecodeWireResponseTruncated(t *testing.T) {
	for _, resp := range wireResponses {
		wire, err := sdk.EncodeGenerateResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(wire) {
			if _, err := decodeWireResponse(wire[:n]); err == nil {
				t.Fatalf("the first %d of %d bytes were accepted", n, len(wire))
			}
		}
	}
}

func TestDecodeWireResponseRejects(t *testing.T) {
	head := "CCMR" + "\x00" + "\x00" // empty apiVersion and kind
	one := head + "\x02"             // one object follows
	tail := "\x00\x00"               // no node annotations, no warnings
	deep := one + strings.Repeat("\x06\x01\x01x", maxWireDepth+1) + "\x00"
	for _, tc := range []struct{ in, want string }{
		{"", "no magic"},
		{"CCMQ\x00\x00\x01\x00\x00", "no magic"},
		{head + "\x01" + tail + "x", "trailing data"},
		{one + "\x04\x00" + tail, "objects[0] is a string, want an object"},
		{one + "\x05\x00" + tail, "objects[0] is an array, want an object"},
		{one + "\x06\x01\x01a\x09" + tail, "unknown value tag 9"},
		{one + "\x06\x02\x01a\x00\x01a\x00" + tail, `the member "a" occurs twice`},
		{one + "\x06\x01\x01\xff\x00" + tail, "member name is not valid UTF-8"},
		{one + "\x06\x01\x01a\x04\x01\xff" + tail, "a string is not valid UTF-8"},
		{one + "\x06\x01\x01a\x03\x0212" + tail[:1], "truncated"},
		{one + "\x06\x01\x01a\x03\x031.5" + tail, `the number "1.5" is not a JSON integer`},
		{one + "\x06\x01\x01a\x03\x0201" + tail, `the number "01" is not a JSON integer`},
		{one + "\x06\x01\x01a\x03\x00" + tail, `the number "" is not a JSON integer`},
		{one + "\x06\x01\x01a\x07\x02{}x" + tail, "truncated"},
		{one + "\x06\x01\x01a\x07\x03{}x" + tail, "a JSON value"},
		{one + "\x06\x01\x01a\x07\x05{\"a\":" + tail, "a JSON value"},
		{one + "\x06\xff\xff\xff\xff\x0f" + tail, "truncated"},
		{head + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "truncated"},
		{head + "\x01\x01\x02n1\x02\x01k\x01\xff\x00", "an annotation value is not valid UTF-8"},
		{head + "\x01\x00\x02\x01\xff", "a warning is not valid UTF-8"},
		{deep, "nested deeper than 10000"},
	} {
		_, err := decodeWireResponse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decodeWireResponse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// addWireSeeds seeds a fuzz target with wireResponses in the binary
// layout.
func addWireSeeds(f *testing.F) {
	for _, resp := range wireResponses {
		wire, err := sdk.EncodeGenerateResponse(resp)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire)
	}
}

// FuzzDecodeWireResponse: whatever a module writes, the decoder returns
// an error or a response, never panics; a response it accepts encodes
// back to one it decodes the same.
func FuzzDecodeWireResponse(f *testing.F) {
	addWireSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decodeWireResponse(in)
		if err != nil {
			return
		}
		again, err := sdk.EncodeGenerateResponse(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeWireResponse(again)
		if err != nil {
			t.Fatalf("re-encoded %#v is refused: %v", got, err)
		}
		if !reflect.DeepEqual(back, got) {
			t.Fatalf("round trip\n got %#v\nwant %#v", back, got)
		}
	})
}
