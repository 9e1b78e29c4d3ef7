package lbmodule

import (
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSplitByVersion(t *testing.T) {
	entry := func(m string, op metav1.ManagedFieldsOperationType, v string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: m, Operation: op, APIVersion: v}
	}
	for _, tc := range []struct {
		name       string
		entries    []metav1.ManagedFieldsEntry
		keep, drop []string
		patch      string
	}{
		{name: "all at the applied version", entries: []metav1.ManagedFieldsEntry{entry("ccm", "Apply", "v2")}, keep: []string{"ccm"},
			patch: `{"metadata":{"managedFields":[{"manager":"ccm","operation":"Apply","apiVersion":"v2"}],"resourceVersion":"7"}}`},
		{name: "upstream at v1 beside the CCM", entries: []metav1.ManagedFieldsEntry{entry("up", "Update", "v1"), entry("ccm", "Apply", "v2")},
			keep: []string{"ccm"}, drop: []string{"up (Update, v1)"},
			patch: `{"metadata":{"managedFields":[{"manager":"ccm","operation":"Apply","apiVersion":"v2"}],"resourceVersion":"7"}}`},
		{name: "only other versions: cleared with the one empty entry", entries: []metav1.ManagedFieldsEntry{entry("b", "Update", "v1"), entry("a", "Update", "v1")},
			drop: []string{"a (Update, v1)", "b (Update, v1)"}, patch: `{"metadata":{"managedFields":[{}],"resourceVersion":"7"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, drop := splitByVersion(tc.entries, "v2")
			var kept []string
			for _, e := range keep {
				kept = append(kept, e.Manager)
			}
			if !slices.Equal(kept, tc.keep) || !slices.Equal(drop, tc.drop) {
				t.Errorf("kept %v dropped %v, want %v and %v", kept, drop, tc.keep, tc.drop)
			}
			p, err := managedFieldsPatch("7", keep)
			if err != nil || string(p) != tc.patch {
				t.Errorf("patch %s (%v), want %s", p, err, tc.patch)
			}
		})
	}
}

func TestApplyHint(t *testing.T) {
	if h := applyHint(errors.New(`BGPPeer.metallb.io "n-0" is invalid: Maximum boundary value must be of type integer with format int32 in spec.myASN`)); h == "" {
		t.Error("no hint for MetalLB < 0.16's int32 ASNs")
	}
	if h := applyHint(errors.New("conflict")); h != "" {
		t.Errorf("hint %q for an unrelated error", h)
	}
}
