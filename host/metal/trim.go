package metal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"github.com/go-json-experiment/json/jsontext"
)

// Some answers carry far more than the CCM reads, and the SDK decodes all of
// it (each object twice: once into its struct, once into a map for
// AdditionalProperties). The worst is a device's BGP neighbours: routes_in
// lists every prefix of the project, so at 10,000 Elastic IPs each answer is
// about a megabyte, and reading the neighbours of 1,000 nodes allocated tens
// of gigabytes in the scale bench. A trimmer rewrites a successful answer's
// body before the SDK sees it, keeping the SDK's request, errors and types.

type trimKey struct{}

// trimmer rewrites the body of a 200 answer; on error the body is passed on
// as it came, for the SDK to decode or to report.
type trimmer func([]byte) ([]byte, error)

func withTrim(ctx context.Context, t trimmer) context.Context {
	return context.WithValue(ctx, trimKey{}, t)
}

// trimResponse applies the request's trimmer, if any, to a 200 answer.
func trimResponse(req *http.Request, resp *http.Response) {
	t, ok := req.Context().Value(trimKey{}).(trimmer)
	if !ok || resp == nil || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err == nil {
		if trimmed, terr := t(body); terr == nil {
			body = trimmed
		}
	}
	// A read error is the SDK's to report; what was read still goes on,
	// which makes it a decoding error there rather than a hang.
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
}

// dropNeighbourRoutes removes routes_in and routes_out from every entry of
// bgp_neighbors: the CCM reads the ASNs, addresses and password only.
func dropNeighbourRoutes(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	raw, ok := top["bgp_neighbors"]
	if !ok {
		return body, nil
	}
	var neighbours []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &neighbours); err != nil {
		return nil, err
	}
	for _, n := range neighbours {
		delete(n, "routes_in")
		delete(n, "routes_out")
	}
	b, err := json.Marshal(neighbours)
	if err != nil {
		return nil, err
	}
	top["bgp_neighbors"] = b
	return json.Marshal(top)
}

// A listing of the project's reservations carries, per reservation, the
// project, its facility with features and ranges, and per assignment the
// parent block, metro, and a dozen flags; the SDK decodes each reservation
// three times (a map to check required fields, the struct, and a re-encode
// to tell anyOf's branches apart). At 10,000 Elastic IPs that was 66 MB of
// the CCM's heap during a listing. These are the members the CCM reads;
// everything else is dropped before the SDK decodes.
var reservationShape = shape{
	"id": nil, "href": nil, "type": nil, "state": nil, "tags": nil, "details": nil, "created_at": nil,
	"address": nil, "address_family": nil, "cidr": nil, "network": nil, "public": nil, "management": nil,
	"metro": locationShape, "facility": locationShape,
	"assignments": shape{
		"id": nil, "href": nil, "state": nil, "address": nil, "address_family": nil, "cidr": nil, "network": nil,
		"public": nil, "management": nil, "assigned_to": nil, "metro": locationShape,
	},
}

var locationShape = shape{"id": nil, "code": nil}

// shape names the members of an object to keep; a member's own shape, if
// not nil, applies to its value (to each element of an array). A value
// that is not what the shape expects is kept as it is.
type shape map[string]shape

// trimReservationList keeps, of every public IPv4 or IPv6 reservation in
// ip_addresses, the members reservationShape names. Anything else (a VRF
// reservation, which the SDK tells apart by members this would drop, or
// an item that is not an object) is left for the SDK to judge. It is one
// pass over jsontext's tokens: decoding into maps and encoding again cost
// as much as the SDK's own decoding.
func trimReservationList(body []byte) ([]byte, error) {
	// Names are not checked for duplicates here (that costs a set per
	// object); the SDK's decoding sees them all the same.
	dup := jsontext.AllowDuplicateNames(true)
	dec := jsontext.NewDecoder(bytes.NewReader(body), dup)
	var out bytes.Buffer
	out.Grow(len(body) / 2)
	enc := jsontext.NewEncoder(&out, dup)
	// One decoder for the items, reset for each.
	var r bytes.Reader
	itemDec := jsontext.NewDecoder(&r, dup)
	if dec.PeekKind() != '{' {
		return nil, errors.New("not a JSON object")
	}
	if err := copyToken(dec, enc); err != nil {
		return nil, err
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if err := enc.WriteToken(name); err != nil {
			return nil, err
		}
		if name.String() != "ip_addresses" || dec.PeekKind() != '[' {
			if err := copyValue(dec, enc); err != nil {
				return nil, err
			}
			continue
		}
		if err := copyToken(dec, enc); err != nil {
			return nil, err
		}
		for k := dec.PeekKind(); k != ']' && k != 0; k = dec.PeekKind() {
			item, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			r.Reset(item)
			itemDec.Reset(&r, dup)
			if !isType(itemDec, trimmedTypes...) {
				err = enc.WriteValue(item)
			} else {
				r.Reset(item)
				itemDec.Reset(&r, dup)
				err = trimValue(itemDec, enc, reservationShape)
			}
			if err != nil {
				return nil, err
			}
		}
		if err := copyToken(dec, enc); err != nil {
			return nil, err
		}
	}
	if err := copyToken(dec, enc); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return out.Bytes(), nil
}

// trimmedTypes are the reservation types a listing's items are trimmed
// to reservationShape for: the ones the cache keeps.
var trimmedTypes = []string{string(metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4), string(metalv1.IPRESERVATIONTYPE_PUBLIC_IPV6)}

// isType tells whether the object dec holds has the member "type" with one
// of the values typ.
func isType(dec *jsontext.Decoder, typ ...string) bool {
	if dec.PeekKind() != '{' {
		return false
	}
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if name.String() == "type" {
			t, err := dec.ReadToken()
			return err == nil && t.Kind() == '"' && slices.Contains(typ, t.String())
		}
		if dec.SkipValue() != nil {
			return false
		}
	}
	return false
}

// trimValue copies the next value from dec to enc, keeping of an object
// the members s names (recursively), and applying s to each element of an
// array.
func trimValue(dec *jsontext.Decoder, enc *jsontext.Encoder, s shape) error {
	switch {
	case s == nil:
		return copyValue(dec, enc)
	case dec.PeekKind() == '[':
		if err := copyToken(dec, enc); err != nil {
			return err
		}
		for k := dec.PeekKind(); k != ']' && k != 0; k = dec.PeekKind() {
			if err := trimValue(dec, enc, s); err != nil {
				return err
			}
		}
		return copyToken(dec, enc)
	case dec.PeekKind() != '{':
		return copyValue(dec, enc)
	}
	if err := copyToken(dec, enc); err != nil {
		return err
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		inner, keep := s[name.String()]
		if !keep {
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if err := enc.WriteToken(name); err != nil {
			return err
		}
		if err := trimValue(dec, enc, inner); err != nil {
			return err
		}
	}
	return copyToken(dec, enc)
}

func copyToken(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
	t, err := dec.ReadToken()
	if err != nil {
		return err
	}
	return enc.WriteToken(t)
}

func copyValue(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	return enc.WriteValue(v)
}

// dropEmptyMaps sets every empty map[string]any reachable from v (a
// pointer to a decoded SDK value) to nil, before a cache keeps the value
// for hours. The SDK decodes each object into a map and deletes the
// members it knows, which leaves AdditionalProperties empty but with all
// its buckets (a Go map never shrinks): a cached device kept about 15 KB of
// empty maps, and the caches' share of the heap in the scale bench (10,000
// reservations, 1,000 devices) fell from 41 to 25 MB without them. A nil
// map reads exactly as an empty one; nothing writes to these.
func dropEmptyMaps(v any) {
	dropEmptyMapsIn(reflect.ValueOf(v))
}

var anyMapType = reflect.TypeFor[map[string]any]()

func dropEmptyMapsIn(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			dropEmptyMapsIn(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() || f.Kind() != reflect.Map {
				dropEmptyMapsIn(f)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			dropEmptyMapsIn(v.Index(i))
		}
	case reflect.Map:
		if v.Type() == anyMapType && v.Len() == 0 && !v.IsNil() && v.CanSet() {
			v.SetZero()
		}
	}
}
