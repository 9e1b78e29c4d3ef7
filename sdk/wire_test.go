package sdk

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The binary request decodes to exactly what the JSON round trip gives.
func TestBinaryRequestMatchesJSON(t *testing.T) {
	for name, req := range map[string]GenerateRequest{
		"empty": {},
		"empty lists": {Services: []Service{}, Nodes: []Node{{Name: "n", Peers: []Peer{}, Labels: map[string]string{}}},
			Existing: []Object{}},
		"full": {
			APIVersion: APIVersion, Kind: KindGenerateRequest, MemoryLimitBytes: 64 << 20,
			Options: Options{Namespace: "ns", ConfigMap: "cm", Params: map[string]string{"b": "2", "a": "1"}},
			Services: []Service{
				{Namespace: "default", Name: "web", UID: "u1", IPs: []string{"145.40.1.5", "2604:1380::1"},
					Ports:       []Port{{Name: "http", Protocol: "TCP", Port: 80}, {Protocol: "UDP", Port: -1}},
					Annotations: map[string]string{"x": "ünïcödé \u2028 <&>", "": ""}, SharingKey: "k",
					Locations: []AddressLocation{{IP: "145.40.1.5", Metro: "sv"}, {IP: "2604:1380::1", Metro: "da", Facility: "da11"}}},
				{Name: "no-ips", IPs: []string{}},
			},
			Nodes: []Node{{Name: "w1", Labels: map[string]string{"kubernetes.io/hostname": "w1"}, LocalASN: 4294967295,
				SourceIP: "10.0.0.1", SourceIPv6: "2604:1380:4641:c500::1", Peers: []Peer{{ASN: 65530, IP: "169.254.255.1", Password: "pw\x00é"},
					{ASN: 65530, IP: "fc00::e", Password: "pw"}}},
				{Name: "w2", SourceIP: "10.0.0.2", Peers: []Peer{{ASN: 65530, IP: "169.254.255.1"}}}},
			Annotations: AnnotationTemplates{LocalASN: "a/{{n}}", PeerASN: "b", PeerIP: "c", SrcIP: "d", BGPPass: "e"},
			Existing: []Object{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"},
				"data": map[string]any{"big": json.Number("123456789012345678901234567890")}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			var want GenerateRequest
			if err := decode(j, &want); err != nil {
				t.Fatal(err)
			}
			b, err := EncodeGenerateRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeGenerateRequest(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("binary round trip\n got %#v\nwant %#v", got, want)
			}
			// Every truncation is an error, never a panic or a short request.
			for i := 0; i < len(b); i++ {
				if _, err := DecodeGenerateRequest(b[:i]); err == nil {
					t.Fatalf("truncated at %d of %d decoded without error", i, len(b))
				}
			}
			if _, err := DecodeGenerateRequest(append(b, 0)); err == nil || !strings.Contains(err.Error(), "trailing data") {
				t.Errorf("trailing byte: %v", err)
			}
		})
	}
}

// marshalResponse writes what encoding/json writes, byte for byte.
func TestMarshalResponseMatchesJSON(t *testing.T) {
	type typed struct {
		A string `json:"a"`
		B int    `json:"b,omitempty"`
	}
	for name, resp := range map[string]GenerateResponse{
		"nil objects": {APIVersion: APIVersion, Kind: KindGenerateResponse},
		"empty":       {Objects: []Object{}, NodeAnnotations: map[string]map[string]string{}, Warnings: []string{}},
		"values": {Objects: []Object{
			{"s": "plain", "esc": "\"\\\b\f\n\r\t\x01\x1f<>&\u2028\u2029\x7f", "utf8": "héllo 日本 \xff\xfe bad",
				"n": nil, "t": true, "f": false, "i": 1, "i32": int32(-2), "i64": int64(1 << 62), "u32": uint32(4e9),
				"u64": uint64(1 << 63), "num": json.Number("1.5e3"), "float": 2.5, "small": 1e-7,
				"m":      map[string]any{"z": []any{1, "x", nil, map[string]string{"k": "v"}}, "a": []string{"p", "q"}},
				"nilmap": map[string]any(nil), "nilslice": []any(nil), "nilstrs": []string(nil),
				"obj": Object{"k": "v"}, "typed": typed{A: "<a>"}, "ptr": &typed{B: 3},
				"strmap": map[string]string{"b": "2", "a": "1"}},
			{"many": map[string]any{"q": 1, "w": 2, "e": 3, "r": 4, "t": 5, "y": 6, "u": 7, "i": 8, "o": 9, "p": 10,
				"a": 11, "s": 12, "d": 13, "f": 14, "g": 15, "h": 16, "j": 17, "k": 18}},
		}, NodeAnnotations: map[string]map[string]string{"w2": {"b": "1"}, "w1": {"a": "<"}},
			Warnings: []string{"careful & <done>"}},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			got, err := marshalResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
		})
	}
	// What encoding/json refuses, marshalResponse refuses.
	if _, err := marshalResponse(GenerateResponse{Objects: []Object{{"n": json.Number("not a number")}}}); err == nil {
		t.Error("an invalid json.Number was encoded")
	}
}

// appendString, eight bytes at a time or one, quotes as encoding/json does.
func FuzzAppendStringMatchesJSON(f *testing.F) {
	for _, s := range []string{"", "plain-ascii.name/with/slashes", "abcdefgh\"", "0123456<89", "x\x00yyyyyyyy", "héllo wörld 1234", "\xff\xfeabcdefghij", "aaaaaaa\u2028bbbbbbbb", "12345678&", "~~~~~~~~\x7f\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// requestMemoryLimit reads the limit from the header alone, and gives 0
// (no tuning) for anything it cannot read.
func TestRequestMemoryLimit(t *testing.T) {
	enc := func(req GenerateRequest) []byte {
		t.Helper()
		b, err := EncodeGenerateRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	full := enc(GenerateRequest{APIVersion: APIVersion, Kind: KindGenerateRequest, MemoryLimitBytes: 96 << 20,
		Services: []Service{{Namespace: "default", Name: "web", IPs: []string{"145.40.1.5"}}}})
	for _, tc := range []struct {
		name string
		in   []byte
		want int64
	}{
		{"full request", full, 96 << 20},
		{"header only", full[:len(wireMagic)+1+len(APIVersion)+1+len(KindGenerateRequest)+4], 96 << 20},
		{"no limit", enc(GenerateRequest{APIVersion: APIVersion, Kind: KindGenerateRequest}), 0},
		{"cut inside the limit", full[:len(wireMagic)+1+len(APIVersion)+1+len(KindGenerateRequest)+1], 0},
		{"JSON", []byte(`{"memoryLimitBytes":1}`), 0},
		{"empty", nil, 0},
		{"a kind longer than the header window", enc(GenerateRequest{Kind: strings.Repeat("k", 300), MemoryLimitBytes: 1}), 0},
		{"over int64", append([]byte(wireMagic+"\x00\x00"), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), 1<<63 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requestMemoryLimit(tc.in); got != tc.want {
				t.Errorf("requestMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRequestLayoutOfOlderModules: a module of ABI version 2 or 3 decodes
// the layout without Service.Locations and refuses anything more, so
// EncodeGenerateRequestV2 writes, byte for byte, what the encoder of those
// versions wrote (testdata/wire/request-abi2.bin, written by the SDK of ABI
// version 3), locations or not; a module of version 4 decodes the layout
// without Node.SourceIPv6, so EncodeGenerateRequestV4 writes what the
// encoder of version 4 wrote (testdata/wire/request-abi4.bin, written by
// the SDK of ABI version 4), SourceIPv6 or not; a module of version 5
// decodes the layout without Peer.Multihop, so EncodeGenerateRequestV5
// writes what the encoder of version 5 wrote (testdata/wire/request-abi5.bin,
// written by the SDK of ABI version 5), Multihop or not;
// EncodeGenerateRequest (version 6) carries all of them.
func TestRequestLayoutOfOlderModules(t *testing.T) {
	want, err := os.ReadFile("testdata/wire/request-abi2.bin")
	if err != nil {
		t.Fatal(err)
	}
	wantV4, err := os.ReadFile("testdata/wire/request-abi4.bin")
	if err != nil {
		t.Fatal(err)
	}
	wantV5, err := os.ReadFile("testdata/wire/request-abi5.bin")
	if err != nil {
		t.Fatal(err)
	}
	req := GenerateRequest{
		APIVersion: APIVersion, Kind: KindGenerateRequest, MemoryLimitBytes: 64 << 20,
		Options: Options{Namespace: "ns", ConfigMap: "cm", Params: map[string]string{"b": "2", "a": "1"}},
		Services: []Service{
			{Namespace: "default", Name: "web", UID: "u1", IPs: []string{"145.40.1.5", "2604:1380::1"},
				Ports:       []Port{{Name: "http", Protocol: "TCP", Port: 80}, {Protocol: "UDP", Port: -1}},
				Annotations: map[string]string{"x": "y"}, SharingKey: "k",
				Locations: []AddressLocation{{IP: "145.40.1.5", Metro: "sv"}}},
			{Namespace: "default", Name: "db", IPs: []string{"145.40.1.6"},
				Locations: []AddressLocation{{IP: "145.40.1.6", Metro: "da", Facility: "da11"}}},
		},
		Nodes: []Node{{Name: "w1", Labels: map[string]string{"kubernetes.io/hostname": "w1"}, LocalASN: 65000,
			SourceIP: "10.0.0.1", Peers: []Peer{{ASN: 65530, IP: "169.254.255.1", Password: "pw"}}}},
		Annotations: AnnotationTemplates{LocalASN: "a/{{n}}", PeerASN: "b", PeerIP: "c", SrcIP: "d", BGPPass: "e"},
		Existing: []Object{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"},
			"data": map[string]any{"big": json.Number("12345")}}},
	}
	req.Nodes[0].SourceIPv6 = "2604:1380:4641:c500::1"
	req.Nodes[0].Peers[0].Multihop = true
	got, err := EncodeGenerateRequestV2(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the layout of ABI versions 2 and 3 changed:\n got %q\nwant %q", got, want)
	}
	got, err = EncodeGenerateRequestV4(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantV4) {
		t.Fatalf("the layout of ABI version 4 changed:\n got %q\nwant %q", got, wantV4)
	}
	got, err = EncodeGenerateRequestV5(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantV5) {
		t.Fatalf("the layout of ABI version 5 changed:\n got %q\nwant %q", got, wantV5)
	}
	b, err := EncodeGenerateRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodeGenerateRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec.Services[0].Locations, req.Services[0].Locations) || !reflect.DeepEqual(dec.Services[1].Locations, req.Services[1].Locations) {
		t.Fatalf("locations = %+v, %+v", dec.Services[0].Locations, dec.Services[1].Locations)
	}
	if dec.Nodes[0].SourceIPv6 != req.Nodes[0].SourceIPv6 {
		t.Fatalf("sourceIPv6 = %q", dec.Nodes[0].SourceIPv6)
	}
	// Version 5's layout is version 4's with the source address after
	// the (one) node's peers, before the annotation templates and the
	// existing objects: nothing else moved.
	var tail wireWriter
	a := req.Annotations
	for _, s := range []string{a.LocalASN, a.PeerASN, a.PeerIP, a.SrcIP, a.BGPPass} {
		tail.str(s)
	}
	existing, _ := json.Marshal(req.Existing)
	tail.str(string(existing))
	if !bytes.HasSuffix(wantV4, tail.b) {
		t.Fatalf("the version 4 fixture does not end with the templates and existing objects: %q", wantV4)
	}
	var v5 wireWriter
	v5.b = append(v5.b, wantV4[:len(wantV4)-len(tail.b)]...)
	v5.str(req.Nodes[0].SourceIPv6)
	v5.b = append(v5.b, tail.b...)
	if !bytes.Equal(wantV5, v5.b) {
		t.Fatalf("the layout of ABI version 5 is not version 4's plus SourceIPv6:\n got %q\nwant %q", wantV5, v5.b)
	}
	// Version 6's is version 5's with a 1 after the (one) peer's password.
	pw := req.Nodes[0].Peers[0].Password
	at := bytes.Index(wantV5, []byte(pw)) + len(pw)
	v6 := append(append(append([]byte{}, wantV5[:at]...), 1), wantV5[at:]...)
	if !bytes.Equal(b, v6) {
		t.Fatalf("the layout of ABI version 6 is not version 5's plus Multihop:\n got %q\nwant %q", b, v6)
	}
	if !dec.Nodes[0].Peers[0].Multihop {
		t.Fatal("multihop was lost in the version 6 round trip")
	}
}
