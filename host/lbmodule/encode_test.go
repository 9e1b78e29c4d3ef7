package lbmodule

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// TestWithOwnedLabel checks the label lands where apply needs it and that
// the module's object is left as it was: only the three maps on the
// label's path are copied, so a change anywhere else would show.
func TestWithOwnedLabel(t *testing.T) {
	cases := []struct {
		name     string
		obj      map[string]any
		wantMeta map[string]any
	}{
		{"labels kept, the owned one added",
			map[string]any{"kind": "IPAddressPool", "metadata": map[string]any{"name": "p", "labels": map[string]any{"a": "b"}}, "spec": map[string]any{"addresses": []any{"1.2.3.4/32"}}},
			map[string]any{"name": "p", "labels": map[string]any{"a": "b", sdk.OwnedLabel: sdk.OwnedValue}}},
		{"no labels",
			map[string]any{"metadata": map[string]any{"name": "p"}},
			map[string]any{"name": "p", "labels": map[string]any{sdk.OwnedLabel: sdk.OwnedValue}}},
		{"labels null",
			map[string]any{"metadata": map[string]any{"name": "p", "labels": nil}},
			map[string]any{"name": "p", "labels": map[string]any{sdk.OwnedLabel: sdk.OwnedValue}}},
		{"no metadata",
			map[string]any{"kind": "X"},
			map[string]any{"labels": map[string]any{sdk.OwnedLabel: sdk.OwnedValue}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := runtime.DeepCopyJSON(c.obj)
			got := withOwnedLabel(c.obj)
			if !reflect.DeepEqual(c.obj, before) {
				t.Errorf("the module's object changed:\n got  %v\n want %v", c.obj, before)
			}
			if !reflect.DeepEqual(got["metadata"], c.wantMeta) {
				t.Errorf("metadata:\n got  %v\n want %v", got["metadata"], c.wantMeta)
			}
			for k, v := range c.obj {
				if k != "metadata" && !reflect.DeepEqual(got[k], v) {
					t.Errorf("%s: got %v, want %v", k, got[k], v)
				}
			}
			if len(got) != len(c.obj)+map[bool]int{true: 0, false: 1}[c.obj["metadata"] != nil] {
				t.Errorf("got members %v, want those of %v and metadata", got, c.obj)
			}
		})
	}
}
