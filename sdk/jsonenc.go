package sdk

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// marshalResponse encodes resp as encoding/json would, byte for byte, but
// without reflection for the values objects are usually made of (maps,
// slices, strings, numbers, booleans): in the Wasm guest, reflection made
// encoding the response of 1,000 Services cost tens of milliseconds. Any
// other value (a typed struct, for example) goes through json.Marshal.
func marshalResponse(resp GenerateResponse) ([]byte, error) {
	// Sized for a typical object (about 350 bytes for a MetalLB pool or
	// peer) so that the buffer is not copied over and over as it grows:
	// at 1,000 Services growing it was a third of the encoding's time.
	b := make([]byte, 0, 4<<10+512*len(resp.Objects))
	b = append(b, `{"apiVersion":`...)
	b = appendString(b, resp.APIVersion)
	b = append(b, `,"kind":`...)
	b = appendString(b, resp.Kind)
	b = append(b, `,"objects":`...)
	var err error
	if resp.Objects == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, o := range resp.Objects {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, map[string]any(o)); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if len(resp.NodeAnnotations) > 0 {
		b = append(b, `,"nodeAnnotations":{`...)
		for i, k := range sortedKeys(resp.NodeAnnotations) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendStringMap(b, resp.NodeAnnotations[k])
		}
		b = append(b, '}')
	}
	if len(resp.Warnings) > 0 {
		b = append(b, `,"warnings":`...)
		b = appendStrings(b, resp.Warnings)
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v any) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '{')
		var buf [8]entry[any]
		for i, e := range appendSortedEntries(buf[:0], v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, e.k)
			b = append(b, ':')
			if b, err = appendValue(b, e.v); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case Object:
		return appendValue(b, map[string]any(v))
	case Fields:
		return appendFields(b, v)
	case map[string]string:
		return appendStringMap(b, v), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case []string:
		return appendStrings(b, v), nil
	}
	// Everything else, json.Number included (encoding/json checks it).
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// entry is one key and value of a map being encoded.
type entry[V any] struct {
	k string
	v V
}

// appendSortedEntries appends m's entries to es, sorted by key. The
// encoder passes a buffer on its stack (a map of an object has a handful
// of keys; one allocation per map was a tenth of the encoding in the
// guest), and takes each value with its key: looking it up again by key
// cost one more string hash per entry, slow in Wasm, which has no AES
// instructions to hash with.
func appendSortedEntries[V any](es []entry[V], m map[string]V) []entry[V] {
	for k, v := range m {
		es = append(es, entry[V]{k, v})
	}
	if len(es) > 16 {
		slices.SortFunc(es, func(a, b entry[V]) int { return strings.Compare(a.k, b.k) })
		return es
	}
	// Insertion sort: objects' maps have a handful of keys, where it beats
	// the general sort in the guest.
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].k < es[j-1].k; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	return es
}

func appendStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	var buf [8]entry[string]
	for i, e := range appendSortedEntries(buf[:0], m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, e.k)
		b = append(b, ':')
		b = appendString(b, e.v)
	}
	return append(b, '}')
}

func appendStrings(b []byte, s []string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, e := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, e)
	}
	return append(b, ']')
}

const hex = "0123456789abcdef"

// plain marks the ASCII bytes encoding/json writes as they are.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString quotes s as encoding/json does with HTML escaping on:
// <, > and & as \u003c, \u003e, \u0026, invalid UTF-8 as \ufffd, and
// U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look: names, labels
		// and addresses are plain ASCII, and the byte-by-byte loop was
		// the largest part of encoding in the guest.
		if i+8 <= len(s) && plain8(load8(s[i:])) {
			i += 8
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// load8 reads the first eight bytes of s (at least eight long) as one
// little-endian word.
func load8(s string) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s), 8))
}

// plain8 tells whether all eight bytes of x are ones plain marks: ASCII,
// not a control character, none of " \ < > &. The tests are the
// classic "has a zero byte" and "has a byte less than n" tricks, exact
// once no byte has its high bit set.
func plain8(x uint64) bool {
	if x&highs != 0 {
		return false
	}
	hasZero := func(v uint64) bool { return (v-ones)&^v&highs != 0 }
	return (x-ones*0x20)&^x&highs == 0 &&
		!hasZero(x^(ones*'"')) && !hasZero(x^(ones*'\\')) &&
		!hasZero(x^(ones*'<')) && !hasZero(x^(ones*'>')) && !hasZero(x^(ones*'&'))
}
