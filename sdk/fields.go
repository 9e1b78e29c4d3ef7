package sdk

import (
	"fmt"
	"slices"
	"strings"
)

// Fields is a JSON object built as a list instead of a map. It encodes
// exactly as the map with the same members would (members sorted by
// name), but costs a fraction to build and to encode: in the Wasm guest,
// making and walking maps was the largest part of generating 1,000 MetalLB
// pools. Use it for the parts of objects a module emits many of (metadata,
// labels, spec); an Object itself stays a map.
//
// A name must not occur twice; the encoder refuses the response if it
// does. Members given in sorted order are written as they are; others are
// sorted on the way out.
type Fields []Field

// Field is one member of Fields.
type Field struct {
	Name  string
	Value any
}

// Get returns the value of the member name, or nil.
func (f Fields) Get(name string) any {
	for _, m := range f {
		if m.Name == name {
			return m.Value
		}
	}
	return nil
}

// MarshalJSON encodes f as the SDK's encoder does, for json.Marshal.
func (f Fields) MarshalJSON() ([]byte, error) {
	return appendFields(nil, f)
}

// member returns the member name of a JSON object held as a map or as
// Fields.
func member(obj any, name string) any {
	switch o := obj.(type) {
	case map[string]any:
		return o[name]
	case Object:
		return o[name]
	case Fields:
		return o.Get(name)
	}
	return nil
}

func appendFields(b []byte, f Fields) ([]byte, error) {
	if f == nil {
		return append(b, "null"...), nil
	}
	sorted := f
	var buf [16]Field // the caller's order is left alone: sort a copy
	if !slices.IsSortedFunc(f, compareFields) {
		sorted = append(buf[:0], f...)
		slices.SortFunc(sorted, compareFields)
	}
	b = append(b, '{')
	var err error
	for i, m := range sorted {
		if i > 0 {
			if sorted[i-1].Name == m.Name {
				return nil, fmt.Errorf("sdk.Fields has the member %q twice", m.Name)
			}
			b = append(b, ',')
		}
		b = appendString(b, m.Name)
		b = append(b, ':')
		if b, err = appendValue(b, m.Value); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func compareFields(a, b Field) int { return strings.Compare(a.Name, b.Name) }
