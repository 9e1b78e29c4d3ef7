package sdk

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/internal/wiretag"
)

// The binary GenerateResponse (ABI version 3). Encoding the response as
// JSON was half of the MetalLB built-in's time in the Wasm guest (quoting
// every string, sorting every map's keys) and decoding it the host's
// largest cost per call. In this layout a string is its length and its
// bytes, and a map's members go out in the map's own order: the host
// builds maps, so order carries nothing. The host decodes it to exactly
// the tree it decodes from the JSON HandleGenerate returns
// (TestWireResponseMatchesJSON).
//
// Layout: the magic (wiretag.Magic); apiVersion and kind as strings; the
// objects as a list (uvarint count plus one, 0 for null) of values; the
// node annotations as a uvarint count of nodes, each a name and a map
// (count plus one, 0 for null) of strings; the warnings as a list of
// strings. A value is one tag byte (package wiretag) and what the tag
// says:
//
//	Null, False, True  nothing more
//	Number             a string: the number as JSON writes it
//	String             a string
//	Array              a uvarint count, then as many values
//	Object             a uvarint count, then as many names (strings) each followed by a value
//	JSON               a string: any other value, as JSON (json.Marshal's encoding)
//
// A string is a uvarint byte count and its bytes, valid UTF-8: the encoder
// replaces invalid bytes with U+FFFD, as JSON encoding does.

// EncodeGenerateResponse encodes resp (objects already sorted) in the
// binary layout the host reads from a module of ABI version 3.
func EncodeGenerateResponse(resp GenerateResponse) ([]byte, error) {
	// Sized as marshalResponse sizes its buffer, for the same reason.
	w := wireWriter{b: make([]byte, 0, 4<<10+384*len(resp.Objects))}
	w.b = append(w.b, wiretag.Magic...)
	w.text(resp.APIVersion)
	w.text(resp.Kind)
	w.list(len(resp.Objects), resp.Objects == nil)
	var err error
	for _, o := range resp.Objects {
		if o == nil {
			w.b = append(w.b, wiretag.Null)
			continue
		}
		if err = w.value(map[string]any(o)); err != nil {
			return nil, err
		}
	}
	w.uint(uint64(len(resp.NodeAnnotations)))
	for node, anns := range resp.NodeAnnotations {
		w.text(node)
		w.list(len(anns), anns == nil)
		for k, v := range anns {
			w.text(k)
			w.text(v)
		}
	}
	w.list(len(resp.Warnings), len(resp.Warnings) == 0)
	for _, s := range resp.Warnings {
		w.text(s)
	}
	return w.b, nil
}

// text writes a string the host decodes as a JSON string would be: valid
// UTF-8, invalid bytes replaced as encoding/json replaces them.
func (w *wireWriter) text(s string) {
	if !utf8.ValidString(s) {
		s = toValidUTF8(s)
	}
	w.str(s)
}

// toValidUTF8 replaces each invalid byte with U+FFFD, as encoding/json
// does (strings.ToValidUTF8 would replace a run of them with one).
func toValidUTF8(s string) string {
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}

// open writes the tag and count of an object or array, or null for a nil
// one (and then reports false: there is nothing more to write).
func (w *wireWriter) open(tag byte, n int, isNil bool) bool {
	if isNil {
		w.b = append(w.b, wiretag.Null)
		return false
	}
	w.b = append(w.b, tag)
	w.uint(uint64(n))
	return true
}

// number writes a tagged number from its decimal text.
func (w *wireWriter) number(b []byte) {
	w.b = append(w.b, wiretag.Number)
	w.uint(uint64(len(b)))
	w.b = append(w.b, b...)
}

// value writes v: the types objects are usually made of directly, anything
// else as JSON. The containers are methods of their own, which write
// their members with value again; the scalars stay here, so that a value
// still costs one type switch (the module's whole output goes through
// it, in the Wasm guest).
func (w *wireWriter) value(v any) error {
	var num [24]byte
	switch v := v.(type) {
	case nil:
		w.b = append(w.b, wiretag.Null)
	case string:
		w.b = append(w.b, wiretag.String)
		w.text(v)
	case bool:
		if v {
			w.b = append(w.b, wiretag.True)
		} else {
			w.b = append(w.b, wiretag.False)
		}
	case int:
		w.number(strconv.AppendInt(num[:0], int64(v), 10))
	case int32:
		w.number(strconv.AppendInt(num[:0], int64(v), 10))
	case int64:
		w.number(strconv.AppendInt(num[:0], v, 10))
	case uint32:
		w.number(strconv.AppendUint(num[:0], uint64(v), 10))
	case uint64:
		w.number(strconv.AppendUint(num[:0], v, 10))
	case map[string]any:
		return w.object(v)
	case Object:
		return w.object(map[string]any(v))
	case Fields:
		return w.fields(v)
	case map[string]string:
		w.stringObject(v)
	case []any:
		return w.array(v)
	case []string:
		w.stringArray(v)
	default:
		// Everything else, json.Number and float64 included: JSON's
		// encoding of them is the contract.
		return w.asJSON(v)
	}
	return nil
}

// object writes a map's members in the map's own order (see the layout
// above: order carries nothing).
func (w *wireWriter) object(v map[string]any) error {
	if !w.open(wiretag.Object, len(v), v == nil) {
		return nil
	}
	for k, e := range v {
		w.text(k)
		if err := w.value(e); err != nil {
			return err
		}
	}
	return nil
}

// fields writes Fields as the object they stand for, in their order.
func (w *wireWriter) fields(v Fields) error {
	if !w.open(wiretag.Object, len(v), v == nil) {
		return nil
	}
	for _, f := range v {
		w.text(f.Name)
		if err := w.value(f.Value); err != nil {
			return err
		}
	}
	return nil
}

// stringObject writes labels, annotations and data as an object of strings,
// without a value call per member.
func (w *wireWriter) stringObject(v map[string]string) {
	if !w.open(wiretag.Object, len(v), v == nil) {
		return
	}
	for k, e := range v {
		w.text(k)
		w.b = append(w.b, wiretag.String)
		w.text(e)
	}
}

// array writes a list's members in order.
func (w *wireWriter) array(v []any) error {
	if !w.open(wiretag.Array, len(v), v == nil) {
		return nil
	}
	for _, e := range v {
		if err := w.value(e); err != nil {
			return err
		}
	}
	return nil
}

// stringArray writes a list of strings, without a value call per member.
func (w *wireWriter) stringArray(v []string) {
	if !w.open(wiretag.Array, len(v), v == nil) {
		return
	}
	for _, e := range v {
		w.b = append(w.b, wiretag.String)
		w.text(e)
	}
}

// asJSON writes v tagged JSON, as json.Marshal encodes it.
func (w *wireWriter) asJSON(v any) error {
	enc, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.b = append(w.b, wiretag.JSON)
	w.uint(uint64(len(enc)))
	w.b = append(w.b, enc...)
	return nil
}
