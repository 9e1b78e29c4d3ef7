package lbmodule

import (
	"reflect"
	"testing"
)

func TestDiffFields(t *testing.T) {
	for _, tc := range []struct {
		name       string
		want, have any
		paths      []string
	}{
		{"equal", map[string]any{"a": 1.0}, map[string]any{"a": 1.0, "extra": true}, nil},
		{"changed leaf", map[string]any{"spec": map[string]any{"x": "b"}}, map[string]any{"spec": map[string]any{"x": "a"}}, []string{"spec.x"}},
		{"missing", map[string]any{"metadata": map[string]any{"labels": map[string]any{"k": "v"}}}, map[string]any{"metadata": map[string]any{}}, []string{"metadata.labels.k"}},
		{"list as a whole", map[string]any{"l": []any{"a"}}, map[string]any{"l": []any{"a", "b"}}, []string{"l"}},
		{"empty map wants nothing", map[string]any{"m": map[string]any{}}, map[string]any{}, nil},
	} {
		var paths []string
		for _, f := range diffFields("", tc.want, tc.have) {
			paths = append(paths, f.Path)
		}
		if !reflect.DeepEqual(paths, tc.paths) {
			t.Errorf("%s: paths %v, want %v", tc.name, paths, tc.paths)
		}
	}
}
