package wasmhost

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/internal/wiretag"
)

// maxWireDepth bounds nesting as the JSON decoder bounds it, so that a
// hostile module cannot make the host recurse without end.
const maxWireDepth = 10000

var errWireTruncated = errors.New("truncated")

// decodeWireResponse decodes the output of a module of ABI version 3 (the
// binary layout of sdk.EncodeGenerateResponse) to exactly the tree
// decodeResponse makes of the same response as JSON. It trusts nothing:
// counts are bounded by the bytes left, strings must be valid UTF-8,
// numbers valid JSON integers, a member name may not occur twice in one
// object, and nothing may follow the response.
func decodeWireResponse(b []byte) (sdk.GenerateResponse, error) {
	var resp sdk.GenerateResponse
	if !bytes.HasPrefix(b, []byte(wiretag.Magic)) {
		return resp, errors.New("not a binary response (no magic)")
	}
	r := &wireTree{b: b[len(wiretag.Magic):], keys: make(map[string]string, 64)}
	resp.APIVersion = r.text("apiVersion")
	resp.Kind = r.text("kind")
	if n, ok := r.list(); ok && r.err == nil {
		resp.Objects = make([]sdk.Object, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			switch tag := r.byte(); tag {
			case wiretag.Null:
				resp.Objects = append(resp.Objects, nil)
			case wiretag.Object:
				resp.Objects = append(resp.Objects, r.object(1))
			default:
				r.fail(fmt.Errorf("objects[%d] is %s, want an object", i, tagName(tag)))
			}
		}
	}
	if n := r.count(); n > 0 && r.err == nil {
		resp.NodeAnnotations = make(map[string]map[string]string, n)
		for range n {
			node := r.text("a node name")
			var anns map[string]string
			if m, ok := r.list(); ok && r.err == nil {
				anns = make(map[string]string, m)
				for range m {
					k := r.text("an annotation name")
					anns[k] = r.text("an annotation value")
				}
			}
			resp.NodeAnnotations[node] = anns
		}
	}
	// An empty list is nil, as the encoder (which writes none) and the
	// JSON of the response (omitempty) have it.
	if n, ok := r.list(); ok && n > 0 && r.err == nil {
		resp.Warnings = make([]string, 0, n)
		for range n {
			resp.Warnings = append(resp.Warnings, r.text("a warning"))
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail(errors.New("trailing data after the response"))
	}
	if r.err != nil {
		return sdk.GenerateResponse{}, r.err
	}
	return resp, nil
}

// wireTree reads the binary response; the first error sticks and ends
// the reading.
type wireTree struct {
	b   []byte
	err error
	// keys holds one copy of each member name, as treeReader's does.
	keys map[string]string
}

func (r *wireTree) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *wireTree) byte() byte {
	if len(r.b) == 0 {
		r.fail(errWireTruncated)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// count reads a uvarint count, bounded by the bytes left (every item
// takes at least one), so a corrupt count cannot make a huge allocation.
func (r *wireTree) count() int {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)-n) {
		r.fail(errWireTruncated)
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

// list reads a count stored plus one, 0 meaning null. The bound is on
// the items, one less than the number stored: bounding the number itself,
// as count does, refused a list of one empty string with nothing after it
// (a response whose warnings are [""]) as truncated.
func (r *wireTree) list() (int, bool) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)-n)+1 {
		r.fail(errWireTruncated)
		return -1, false
	}
	r.b = r.b[n:]
	return int(v) - 1, v > 0
}

func (r *wireTree) bytes() []byte {
	n := r.count()
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

// text reads a string, which must be valid UTF-8 (what names it in the
// error).
func (r *wireTree) text(what string) string {
	s := r.bytes()
	if !utf8.Valid(s) {
		r.fail(fmt.Errorf("%s is not valid UTF-8", what))
		return ""
	}
	return string(s)
}

func (r *wireTree) object(depth int) map[string]any {
	if depth > maxWireDepth {
		r.fail(fmt.Errorf("nested deeper than %d", maxWireDepth))
		return nil
	}
	n := r.count()
	m := make(map[string]any, n)
	for range n {
		name := r.bytes()
		key, ok := r.keys[string(name)] // no allocation for the lookup
		if !ok {
			if !utf8.Valid(name) {
				r.fail(errors.New("a member name is not valid UTF-8"))
				return nil
			}
			key = string(name)
			r.keys[key] = key
		}
		if _, dup := m[key]; dup {
			r.fail(fmt.Errorf("the member %q occurs twice in one object", key))
			return nil
		}
		v := r.value(depth + 1)
		if r.err != nil {
			return nil
		}
		m[key] = v
	}
	return m
}

func (r *wireTree) value(depth int) any {
	switch tag := r.byte(); tag {
	case wiretag.Null:
		return nil
	case wiretag.False:
		return false
	case wiretag.True:
		return true
	case wiretag.Number:
		s := r.bytes()
		if !isJSONInteger(s) {
			r.fail(fmt.Errorf("the number %q is not a JSON integer", s))
			return nil
		}
		return json.Number(s)
	case wiretag.String:
		return r.text("a string")
	case wiretag.Array:
		if depth > maxWireDepth {
			r.fail(fmt.Errorf("nested deeper than %d", maxWireDepth))
			return nil
		}
		n := r.count()
		s := make([]any, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			s = append(s, r.value(depth+1))
		}
		return s
	case wiretag.Object:
		return r.object(depth)
	case wiretag.JSON:
		return r.json(r.bytes())
	default:
		if r.err == nil {
			r.fail(fmt.Errorf("unknown value tag %d", tag))
		}
		return nil
	}
}

// json decodes a value the module sent as JSON, with treeReader: the same
// strictness and the same shared names.
func (r *wireTree) json(raw []byte) any {
	t := treeReader{dec: jsontext.NewDecoder(bytes.NewReader(raw)), keys: r.keys}
	v, err := t.value()
	if err == nil {
		if _, err = t.dec.ReadToken(); err == io.EOF {
			return v
		} else if err == nil {
			err = errors.New("trailing data after the JSON value")
		}
	}
	r.fail(fmt.Errorf("a JSON value: %w", err))
	return nil
}

// isJSONInteger tells whether s is an integer as JSON writes one: an
// optional minus, then 0 or digits not starting with 0.
func isJSONInteger(s []byte) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func tagName(tag byte) string {
	switch tag {
	case wiretag.False, wiretag.True:
		return "a boolean"
	case wiretag.Number:
		return "a number"
	case wiretag.String:
		return "a string"
	case wiretag.Array:
		return "an array"
	case wiretag.JSON:
		return "a JSON value"
	}
	return fmt.Sprintf("tag %d", tag)
}
