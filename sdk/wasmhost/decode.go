package wasmhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// decodeResponse decodes a module's generate output. It is the host's
// largest cost per call after the guest itself: encoding/json builds the
// objects' maps through reflection, and at 1,000 Services took twice as
// long as this walk over jsontext's tokens (and 1.4 times the memory,
// because every object carried its own copy of every key).
//
// It is stricter than encoding/json, never looser (FuzzDecodeResponse
// checks both directions): field names match exactly, a name twice in one
// object, invalid UTF-8 and anything after the document are errors.
// Numbers stay json.Number, as with UseNumber, so an int64 keeps its
// digits.
func decodeResponse(b []byte) (sdk.GenerateResponse, error) {
	var resp sdk.GenerateResponse
	r := treeReader{dec: jsontext.NewDecoder(bytes.NewReader(b)), keys: make(map[string]string, 64)}
	if r.dec.PeekKind() != '{' {
		return resp, r.unexpected("the response", "an object")
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return resp, err
	}
	for r.dec.PeekKind() == '"' {
		name, err := r.dec.ReadToken()
		if err != nil {
			return resp, err
		}
		switch field := name.String(); field {
		case "apiVersion":
			resp.APIVersion, err = r.string(field)
		case "kind":
			resp.Kind, err = r.string(field)
		case "objects":
			resp.Objects, err = r.objects()
		case "nodeAnnotations":
			err = r.small(field, &resp.NodeAnnotations)
		case "warnings":
			err = r.small(field, &resp.Warnings)
		default:
			err = fmt.Errorf("unknown field %q in the response", field)
		}
		if err != nil {
			return resp, err
		}
	}
	if _, err := r.dec.ReadToken(); err != nil { // the closing brace
		return resp, err
	}
	if _, err := r.dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("trailing data after the JSON document")
		}
		return resp, err
	}
	return resp, nil
}

type treeReader struct {
	dec *jsontext.Decoder
	// keys holds one copy of each object key: 10,000 objects share one
	// "apiVersion" instead of holding 10,000.
	keys map[string]string
}

func (r *treeReader) unexpected(what, want string) error {
	if k := r.dec.PeekKind(); k != 0 {
		return fmt.Errorf("%s is %s, want %s", what, kindName(k), want)
	}
	_, err := r.dec.ReadToken()
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "not JSON"
}

func (r *treeReader) string(field string) (string, error) {
	switch r.dec.PeekKind() {
	case '"':
		t, err := r.dec.ReadToken()
		return t.String(), err
	case 'n':
		_, err := r.dec.ReadToken()
		return "", err
	}
	return "", r.unexpected(fmt.Sprintf("%q", field), "a string")
}

// small decodes a field the module rarely fills with encoding/json, whose
// type errors are as good as any.
func (r *treeReader) small(field string, v any) error {
	raw, err := r.dec.ReadValue()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%q: %w", field, err)
	}
	return nil
}

func (r *treeReader) objects() ([]sdk.Object, error) {
	switch r.dec.PeekKind() {
	case 'n':
		_, err := r.dec.ReadToken()
		return nil, err
	case '[':
	default:
		return nil, r.unexpected(`"objects"`, "an array")
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, err
	}
	objs := []sdk.Object{}
	for k := r.dec.PeekKind(); k != ']'; k = r.dec.PeekKind() {
		switch k {
		case '{':
			m, err := r.object()
			if err != nil {
				return nil, err
			}
			objs = append(objs, m)
		case 'n':
			if _, err := r.dec.ReadToken(); err != nil {
				return nil, err
			}
			objs = append(objs, nil)
		default:
			return nil, r.unexpected(fmt.Sprintf("objects[%d]", len(objs)), "an object")
		}
	}
	_, err := r.dec.ReadToken()
	return objs, err
}

// object reads the object the decoder is at.
func (r *treeReader) object() (map[string]any, error) {
	if _, err := r.dec.ReadToken(); err != nil {
		return nil, err
	}
	m := make(map[string]any)
	for r.dec.PeekKind() == '"' {
		raw, err := r.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		name, err := r.key(raw)
		if err != nil {
			return nil, err
		}
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		m[name] = v
	}
	_, err := r.dec.ReadToken()
	return m, err
}

// key turns a quoted name into its shared copy.
func (r *treeReader) key(raw jsontext.Value) (string, error) {
	body := []byte(raw[1 : len(raw)-1])
	if bytes.IndexByte(body, '\\') >= 0 {
		var err error
		if body, err = jsontext.AppendUnquote(nil, raw); err != nil {
			return "", err
		}
	}
	if s, ok := r.keys[string(body)]; ok { // no allocation for the lookup
		return s, nil
	}
	s := string(body)
	r.keys[s] = s
	return s, nil
}

func (r *treeReader) value() (any, error) {
	switch r.dec.PeekKind() {
	case '{':
		return r.object()
	case '[':
		if _, err := r.dec.ReadToken(); err != nil {
			return nil, err
		}
		s := []any{}
		for k := r.dec.PeekKind(); k != ']' && k != 0; k = r.dec.PeekKind() {
			v, err := r.value()
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		_, err := r.dec.ReadToken()
		return s, err
	case 0:
		return nil, r.unexpected("a value", "JSON")
	}
	t, err := r.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch t.Kind() {
	case '"':
		return t.String(), nil
	case '0':
		return json.Number(t.String()), nil
	case 't', 'f':
		return t.Bool(), nil
	}
	return nil, nil // null
}
