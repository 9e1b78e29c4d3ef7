package watchcache

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

func TestSlim(t *testing.T) {
	c := New(t.Context(), nil, nil, klog.Background(), nil, "owned", "kind")
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   map[string]string
	}{
		{"no labels", nil, nil},
		{"none kept", map[string]string{"service-a": "default"}, nil},
		{"the kept one of several", map[string]string{"owned": "yes", "service-a": "default"}, map[string]string{"owned": "yes"}},
		{"every kept one", map[string]string{"owned": "yes", "kind": "pool", "x": "y"}, map[string]string{"owned": "yes", "kind": "pool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
				Name: "a", Namespace: "ns", UID: types.UID("u"), ResourceVersion: "7", Generation: 3,
				Labels: tc.labels, Annotations: map[string]string{"big": "yes"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
			}}
			got := c.slim(in, "ns").(*metav1.PartialObjectMetadata)
			want := metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3, Labels: tc.want}
			if !reflect.DeepEqual(got.ObjectMeta, want) {
				t.Errorf("slim = %+v, want %+v", got.ObjectMeta, want)
			}
		})
	}

	t.Run("equal kept labels share one map", func(t *testing.T) {
		a := c.slim(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"owned": "yes", "service-a": "x"}}}, "")
		b := c.slim(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"owned": "yes", "service-b": "y"}}}, "")
		la, lb := a.(*metav1.PartialObjectMetadata).Labels, b.(*metav1.PartialObjectMetadata).Labels
		if reflect.ValueOf(la).UnsafePointer() != reflect.ValueOf(lb).UnsafePointer() {
			t.Errorf("two maps for %v and %v: want one", la, lb)
		}
	})

	t.Run("a tombstone passes as it is", func(t *testing.T) {
		d := cache.DeletedFinalStateUnknown{Key: "ns/a"}
		if got := c.slim(d, "ns"); got != d {
			t.Errorf("slim(tombstone) = %v", got)
		}
	})
}
