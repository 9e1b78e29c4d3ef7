package emulator

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// encodeJSON writes v (built from the SDK's model types) as JSON.
//
// It gives the same JSON value as json.Marshal(v), which the SDK models
// implement through ToMap: a field is present when ToMap would put it in
// the map (nil pointers, slices and maps of "omitempty" fields left out,
// Nullable fields only when set, AdditionalProperties merged in), and
// anyOf/oneOf wrappers encode their one set member. Only the key order
// differs: struct order instead of sorted. It exists because the SDK's way
// (a map per object, marshalled, then compacted again by every enclosing
// object) is what limited the emulator's throughput; TestEncodeMatchesSDK
// checks the equivalence on every kind of answer.
func encodeJSON(buf *bytes.Buffer, v any) error {
	return encodeValue(buf, reflect.ValueOf(v))
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	toMapType     = reflect.TypeFor[interface {
		ToMap() (map[string]interface{}, error)
	}]()
	isSetType = reflect.TypeFor[interface{ IsSet() bool }]()
)

type fieldPlan struct {
	index    int
	key      []byte // `"name":`
	omitNil  bool
	nullable bool
}

type typePlan struct {
	kind   int // planModel, planUnion, planOther
	fields []fieldPlan
	addl   int // index of AdditionalProperties, or -1
}

const (
	planModel = iota // an SDK model: encode its fields
	planUnion        // an anyOf/oneOf wrapper: encode the first set member
	planOther        // anything else: encoding/json
)

var plans sync.Map // reflect.Type -> *typePlan

func planFor(t reflect.Type) *typePlan {
	if p, ok := plans.Load(t); ok {
		return p.(*typePlan)
	}
	p := &typePlan{kind: planOther, addl: -1}
	switch {
	case t == timeType:
	case reflect.PointerTo(t).Implements(toMapType) || t.Implements(toMapType):
		p.kind = planModel
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Name == "AdditionalProperties" && f.Type.Kind() == reflect.Map {
				p.addl = i
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			var kb bytes.Buffer
			writeString(&kb, name)
			kb.WriteByte(':')
			p.fields = append(p.fields, fieldPlan{
				index: i, key: kb.Bytes(),
				omitNil:  slices.Contains(strings.Split(opts, ","), "omitempty"),
				nullable: f.Type.Implements(isSetType) || reflect.PointerTo(f.Type).Implements(isSetType),
			})
		}
	case t.Kind() == reflect.Struct && t.Implements(marshalerType) && isUnion(t):
		p.kind = planUnion
	}
	plans.Store(t, p)
	return p
}

// isUnion: a struct whose fields are all untagged pointers (the SDK's
// anyOf/oneOf wrappers).
func isUnion(t reflect.Type) bool {
	if t.NumField() == 0 {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("json") != "" || f.Type.Kind() != reflect.Pointer {
			return false
		}
	}
	return true
}

// isNil is the SDK's IsNil.
func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Map, reflect.Pointer, reflect.UnsafePointer, reflect.Interface, reflect.Slice:
		return v.IsNil()
	case reflect.Array:
		return v.IsZero()
	}
	return false
}

func encodeValue(buf *bytes.Buffer, v reflect.Value) error {
	if !v.IsValid() {
		buf.WriteString("null")
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		return encodeValue(buf, v.Elem())
	case reflect.String:
		writeString(buf, v.String())
		return nil
	case reflect.Bool:
		buf.WriteString(strconv.FormatBool(v.Bool()))
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		buf.WriteString(strconv.FormatInt(v.Int(), 10))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		buf.WriteString(strconv.FormatUint(v.Uint(), 10))
		return nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) || math.Abs(f) >= 1e21 {
			return encodeStd(buf, v)
		}
		buf.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
		return nil
	case reflect.Slice:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return encodeStd(buf, v)
		}
		buf.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeValue(buf, v.Index(i)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case reflect.Map:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return encodeStd(buf, v)
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k.String())
			buf.WriteByte(':')
			if err := encodeValue(buf, v.MapIndex(k)); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case reflect.Struct:
		p := planFor(v.Type())
		switch p.kind {
		case planModel:
			return encodeModel(buf, v, p)
		case planUnion:
			for i := 0; i < v.NumField(); i++ {
				if f := v.Field(i); !f.IsNil() {
					return encodeValue(buf, f)
				}
			}
			buf.WriteString("null")
			return nil
		}
	}
	return encodeStd(buf, v)
}

func encodeModel(buf *bytes.Buffer, v reflect.Value, p *typePlan) error {
	buf.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			buf.WriteByte(',')
		}
		first = false
	}
	for _, f := range p.fields {
		fv := v.Field(f.index)
		switch {
		case f.nullable:
			if !nullableIsSet(fv) {
				continue
			}
			sep()
			buf.Write(f.key)
			if err := encodeStd(buf, fv); err != nil {
				return err
			}
			continue
		case f.omitNil && isNil(fv):
			continue
		}
		sep()
		buf.Write(f.key)
		if err := encodeValue(buf, fv); err != nil {
			return err
		}
	}
	if p.addl >= 0 {
		m := v.Field(p.addl)
		if m.Len() > 0 {
			keys := m.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				sep()
				writeString(buf, k.String())
				buf.WriteByte(':')
				if err := encodeValue(buf, m.MapIndex(k)); err != nil {
					return err
				}
			}
		}
	}
	buf.WriteByte('}')
	return nil
}

func nullableIsSet(v reflect.Value) bool {
	if v.Type().Implements(isSetType) {
		return v.Interface().(interface{ IsSet() bool }).IsSet()
	}
	if v.CanAddr() {
		return v.Addr().Interface().(interface{ IsSet() bool }).IsSet()
	}
	cp := reflect.New(v.Type())
	cp.Elem().Set(v)
	return cp.Interface().(interface{ IsSet() bool }).IsSet()
}

// encodeStd hands a value to encoding/json (times, nullables, rarities).
func encodeStd(buf *bytes.Buffer, v reflect.Value) error {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

const hexDigits = "0123456789abcdef"

// writeString writes s as a JSON string, escaping like encoding/json
// (including <, > and &).
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			buf.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				buf.WriteByte('\\')
				buf.WriteByte(c)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString(s[start:i])
			buf.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf.WriteString(s[start:i])
			buf.WriteString(`\u202`)
			buf.WriteByte(hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}
