package sdk

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// The binary GenerateRequest (ABI version 2 and later). Decoding the ~190 KB JSON
// request of 1,000 Services with encoding/json took ~45 ms inside the Wasm
// guest (reflection); this layout decodes in a few, with no reflection.
// JSON stays what authors see: the types, HandleGenerate and sdktest
// speak it, and Existing travels as JSON inside the binary frame.
//
// Layout: the magic "CCMQ", then fields in the order of the Go types, each
// string as a uvarint length and its bytes, each integer as a uvarint, each
// map as a uvarint count and its items (sorted by key), each list as a
// uvarint count and its items. The decoded request equals what the JSON
// round trip gives: a field JSON tags omitempty decodes empty as nil; in one
// it does not, the count is stored plus one, 0 meaning nil.
//
// ABI version 4 added each Service's Locations, after its SharingKey (a
// count, then IP, metro and facility of each). Modules of versions 2 and 3
// decode the layout without them and refuse anything after the request,
// so the host sends those EncodeGenerateRequestV2's bytes.
//
// ABI version 5 added each Node's SourceIPv6, after its Peers. A module of
// version 4 decodes the layout without it, so the host sends it
// EncodeGenerateRequestV4's bytes (of the request without IPv6: see
// ABIVersion).
//
// ABI version 6 added each Peer's Multihop, after its Password (a uvarint,
// 1 for true). A module of version 5 decodes the layout without it, so the
// host sends it EncodeGenerateRequestV5's bytes.

const wireMagic = "CCMQ"

// The layouts: what each encoder writes after the fields of version 2.
type wireLayout struct {
	locations  bool // Service.Locations (ABI version 4)
	sourceIPv6 bool // Node.SourceIPv6 (ABI version 5)
	multihop   bool // Peer.Multihop (ABI version 6)
}

// EncodeGenerateRequest encodes req in the binary layout the glue of ABI
// version 6 decodes.
func EncodeGenerateRequest(req GenerateRequest) ([]byte, error) {
	return encodeGenerateRequest(req, wireLayout{locations: true, sourceIPv6: true, multihop: true})
}

// EncodeGenerateRequestV5 encodes req in the binary layout of ABI version
// 5, which has no Peer.Multihop: what a module built with that SDK
// decodes.
func EncodeGenerateRequestV5(req GenerateRequest) ([]byte, error) {
	return encodeGenerateRequest(req, wireLayout{locations: true, sourceIPv6: true})
}

// EncodeGenerateRequestV4 encodes req in the binary layout of ABI version
// 4, which has no Node.SourceIPv6: what a module built with that SDK
// decodes. It writes the rest of req as it is: leaving out what else such
// a module does not expect (IPv6 addresses and peers) is the host's part.
func EncodeGenerateRequestV4(req GenerateRequest) ([]byte, error) {
	return encodeGenerateRequest(req, wireLayout{locations: true})
}

// EncodeGenerateRequestV2 encodes req in the binary layout of ABI versions
// 2 and 3, which has no Service.Locations (and no Node.SourceIPv6): what a
// module built with an older SDK decodes.
func EncodeGenerateRequestV2(req GenerateRequest) ([]byte, error) {
	return encodeGenerateRequest(req, wireLayout{})
}

func encodeGenerateRequest(req GenerateRequest, layout wireLayout) ([]byte, error) {
	existing := []byte(nil)
	if len(req.Existing) > 0 {
		var err error
		if existing, err = json.Marshal(req.Existing); err != nil {
			return nil, err
		}
	}
	w := wireWriter{b: make([]byte, 0, 4096)}
	w.b = append(w.b, wireMagic...)
	w.str(req.APIVersion)
	w.str(req.Kind)
	w.uint(uint64(max(req.MemoryLimitBytes, 0)))
	w.str(req.Options.Namespace)
	w.str(req.Options.ConfigMap)
	w.strMap(req.Options.Params)
	w.list(len(req.Services), req.Services == nil)
	for _, s := range req.Services {
		w.str(s.Namespace)
		w.str(s.Name)
		w.str(s.UID)
		w.list(len(s.IPs), s.IPs == nil)
		for _, ip := range s.IPs {
			w.str(ip)
		}
		w.uint(uint64(len(s.Ports)))
		for _, p := range s.Ports {
			w.str(p.Name)
			w.str(p.Protocol)
			w.uint(uint64(uint32(p.Port)))
		}
		w.strMap(s.Annotations)
		w.str(s.SharingKey)
		if layout.locations {
			w.uint(uint64(len(s.Locations)))
			for _, l := range s.Locations {
				w.str(l.IP)
				w.str(l.Metro)
				w.str(l.Facility)
			}
		}
	}
	w.list(len(req.Nodes), req.Nodes == nil)
	for _, n := range req.Nodes {
		w.str(n.Name)
		w.strMap(n.Labels)
		w.uint(uint64(n.LocalASN))
		w.str(n.SourceIP)
		w.list(len(n.Peers), n.Peers == nil)
		for _, p := range n.Peers {
			w.uint(uint64(p.ASN))
			w.str(p.IP)
			w.str(string(p.Password))
			if layout.multihop {
				w.uint(boolUint(p.Multihop))
			}
		}
		if layout.sourceIPv6 {
			w.str(n.SourceIPv6)
		}
	}
	a := req.Annotations
	for _, s := range []string{a.LocalASN, a.PeerASN, a.PeerIP, a.SrcIP, a.BGPPass} {
		w.str(s)
	}
	w.str(string(existing))
	return w.b, nil
}

func boolUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// requestMemoryLimit reads the memory limit from the header of a binary
// request without decoding the rest, or 0 if the header is not readable.
// The guest tunes its collector with it before decoding (see tuneGC):
// decoding is the first large burst of allocations, and with the default
// pacing a 10,000-Service request set off a collection in the guest, which
// is single-threaded and marks slowly.
func requestMemoryLimit(b []byte) int64 {
	if len(b) < len(wireMagic) || string(b[:len(wireMagic)]) != wireMagic {
		return 0
	}
	// The header is two short strings and a number; 256 bytes hold it
	// unless the strings are not what they should be, and then it is 0.
	r := wireReader{s: string(b[len(wireMagic):min(len(b), len(wireMagic)+256)])}
	_, _ = r.str(), r.str()
	limit := r.uint()
	if r.err != nil {
		return 0
	}
	return int64(min(limit, math.MaxInt64))
}

// DecodeGenerateRequest decodes what EncodeGenerateRequest encoded (the
// layout of ABI version 6, which the host sends a module of this SDK).
func DecodeGenerateRequest(b []byte) (GenerateRequest, error) {
	var req GenerateRequest
	if len(b) < len(wireMagic) || string(b[:len(wireMagic)]) != wireMagic {
		return req, errors.New("decoding the host's request: not a binary GenerateRequest")
	}
	// One string for the whole input: every field is a substring of it,
	// one allocation instead of one per field.
	r := wireReader{s: string(b[len(wireMagic):])}
	req.APIVersion = r.str()
	req.Kind = r.str()
	req.MemoryLimitBytes = int64(min(r.uint(), math.MaxInt64))
	req.Options.Namespace = r.str()
	req.Options.ConfigMap = r.str()
	req.Options.Params = r.strMap()
	if n, ok := r.list(); ok {
		req.Services = make([]Service, n)
		for i := range req.Services {
			s := &req.Services[i]
			s.Namespace, s.Name, s.UID = r.str(), r.str(), r.str()
			if n, ok := r.list(); ok {
				s.IPs = make([]string, n)
				for j := range s.IPs {
					s.IPs[j] = r.str()
				}
			}
			if n := r.count(); n > 0 {
				s.Ports = make([]Port, n)
				for j := range s.Ports {
					s.Ports[j] = Port{Name: r.str(), Protocol: r.str(), Port: int32(uint32(r.uint()))}
				}
			}
			s.Annotations = r.strMap()
			s.SharingKey = r.str()
			if n := r.count(); n > 0 {
				s.Locations = make([]AddressLocation, n)
				for j := range s.Locations {
					s.Locations[j] = AddressLocation{IP: r.str(), Metro: r.str(), Facility: r.str()}
				}
			}
		}
	}
	if n, ok := r.list(); ok {
		req.Nodes = make([]Node, n)
		for i := range req.Nodes {
			nd := &req.Nodes[i]
			nd.Name = r.str()
			nd.Labels = r.strMap()
			nd.LocalASN = uint32(r.uint())
			nd.SourceIP = r.str()
			if n, ok := r.list(); ok {
				nd.Peers = make([]Peer, n)
				for j := range nd.Peers {
					nd.Peers[j] = Peer{ASN: uint32(r.uint()), IP: r.str(), Password: Secret(r.str()), Multihop: r.bool()}
				}
			}
			nd.SourceIPv6 = r.str()
		}
	}
	a := &req.Annotations
	a.LocalASN, a.PeerASN, a.PeerIP, a.SrcIP, a.BGPPass = r.str(), r.str(), r.str(), r.str(), r.str()
	existing := r.str()
	if r.err != nil {
		return GenerateRequest{}, fmt.Errorf("decoding the host's request: %w", r.err)
	}
	if r.s != "" {
		return GenerateRequest{}, errors.New("decoding the host's request: trailing data after the request")
	}
	if existing != "" {
		if err := decode([]byte(existing), &req.Existing); err != nil {
			return GenerateRequest{}, err
		}
		// An empty list is nil, as the JSON round trip (omitempty) and
		// the encoder (which writes none) have it: "[]" must not decode
		// to a request that re-encodes to another.
		if len(req.Existing) == 0 {
			req.Existing = nil
		}
	}
	return req, nil
}

type wireWriter struct{ b []byte }

func (w *wireWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *wireWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// list writes the length of a list JSON does not omit when empty.
func (w *wireWriter) list(n int, isNil bool) {
	if isNil {
		w.uint(0)
		return
	}
	w.uint(uint64(n) + 1)
}

// strMap writes a map whose JSON field is omitempty: empty is nil.
func (w *wireWriter) strMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w.uint(uint64(len(keys)))
	for _, k := range keys {
		w.str(k)
		w.str(m[k])
	}
}

type wireReader struct {
	s   string
	err error
}

var errTruncated = errors.New("truncated binary request")

func (r *wireReader) uint() uint64 {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		if r.s == "" {
			r.fail()
			return 0
		}
		c := r.s[0]
		r.s = r.s[1:]
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	r.fail()
	return 0
}

// count reads a list length, bounded by what is left (every item takes at
// least one byte), so a corrupt length cannot make a huge allocation.
func (r *wireReader) count() int {
	n := r.uint()
	if n > uint64(len(r.s)) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *wireReader) str() string {
	n := r.count()
	s := r.s[:n]
	r.s = r.s[n:]
	return s
}

// bool reads what boolUint wrote; anything but 0 or 1 is corrupt.
func (r *wireReader) bool() bool {
	v := r.uint()
	if v > 1 {
		r.fail()
	}
	return v == 1
}

// list reads what wireWriter.list wrote: the length, and false for nil.
func (r *wireReader) list() (int, bool) {
	n := r.count()
	return n - 1, n > 0
}

func (r *wireReader) strMap() map[string]string {
	n := r.count()
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.str()
		m[k] = r.str()
	}
	return m
}

func (r *wireReader) fail() {
	if r.err == nil {
		r.err = errTruncated
	}
	r.s = ""
}
