package sdk

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// asMap is the map Fields stands for.
func asMap(v any) any {
	switch v := v.(type) {
	case Fields:
		if v == nil {
			return map[string]any(nil)
		}
		m := map[string]any{}
		for _, f := range v {
			m[f.Name] = asMap(f.Value)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = asMap(e)
		}
		return out
	}
	return v
}

// Fields encode as the map with the same members, in the SDK's encoder
// and through json.Marshal, whatever order they are given in.
func TestFieldsEncodeAsTheirMap(t *testing.T) {
	var many Fields
	for i := range 20 {
		many = append(many, Field{fmt.Sprintf("k%02d", (i*7)%20), i})
	}
	for name, f := range map[string]Fields{
		"sorted":   {{"a", 1}, {"b", "x"}, {"c", nil}},
		"unsorted": {{"port", 179}, {"address", "<10.0.0.1>"}, {"asn", int64(65000)}},
		"nested": {{"spec", Fields{{"z", []any{Fields{{"k", "v"}}, 1}}, {"a", map[string]string{"l": "m"}}}},
			{"meta", map[string]any{"f": Fields{{"y", true}, {"x", false}}}}},
		"more than the stack buffer": many,
		"empty":                      {},
		"nil":                        nil,
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(asMap(f))
			if err != nil {
				t.Fatal(err)
			}
			got, err := marshalResponse(GenerateResponse{Objects: []Object{{"f": f}}})
			if err != nil {
				t.Fatal(err)
			}
			wantResp, _ := json.Marshal(GenerateResponse{Objects: []Object{{"f": json.RawMessage(want)}}})
			if string(got) != string(wantResp) {
				t.Errorf("encoder:\n got %s\nwant %s", got, wantResp)
			}
			viaJSON, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if string(viaJSON) != string(want) {
				t.Errorf("json.Marshal:\n got %s\nwant %s", viaJSON, want)
			}
		})
	}
	if name := many[0].Name; name != "k00" || many[1].Name != "k07" {
		t.Errorf("encoding reordered the caller's Fields: %v", many[:2])
	}
}

func TestFieldsWithANameTwiceAreRefused(t *testing.T) {
	_, err := marshalResponse(GenerateResponse{Objects: []Object{{"spec": Fields{{"b", 1}, {"a", 2}, {"b", 3}}}}})
	if err == nil || !strings.Contains(err.Error(), `the member "b" twice`) {
		t.Errorf("error %v, want one naming the member twice", err)
	}
}

// The accessors read metadata held as Fields as they read a map.
func TestObjectAccessorsReadFields(t *testing.T) {
	o := Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": Fields{
		{"labels", Fields{{"a", "1"}, {"n", 2}}}, {"name", "cm"}, {"namespace", "ns"}}}
	if o.Name() != "cm" || o.Namespace() != "ns" || fmt.Sprint(o.Labels()) != "map[a:1]" {
		t.Errorf("Name %q, Namespace %q, Labels %v", o.Name(), o.Namespace(), o.Labels())
	}
	o["metadata"] = map[string]any{"labels": map[string]string{"b": "2"}}
	if fmt.Sprint(o.Labels()) != "map[b:2]" {
		t.Errorf("Labels of a map[string]string: %v", o.Labels())
	}
	if (Fields{{"x", 1}}).Get("y") != nil || (Fields{{"x", 1}}).Get("x") != 1 {
		t.Error("Get")
	}
}
