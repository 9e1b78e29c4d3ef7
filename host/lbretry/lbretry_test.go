package lbretry

import (
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestRetry: Retry hands the Services whose last sync failed, and only
// those, to every handler registered through the wrapped informer (by any
// of the three ways to add one); a Service gone from the informer is
// forgotten.
func TestRetry(t *testing.T) {
	svc := func(name string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	r := New()
	inf := r.Wrap(factory.Core().V1().Services())
	var mu sync.Mutex
	handed := map[string][]string{}
	handler := func(id string) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			handed[id] = append(handed[id], obj.(*v1.Service).Name)
		}}
	}
	if _, err := inf.Informer().AddEventHandler(handler("plain")); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.Informer().AddEventHandlerWithResyncPeriod(handler("resync"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.Informer().AddEventHandlerWithOptions(handler("options"), cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	store := factory.Core().V1().Services().Informer().GetStore()
	for _, name := range []string{"a", "b", "c"} {
		if err := store.Add(svc(name)); err != nil {
			t.Fatal(err)
		}
	}

	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"nothing failed", func() {}, nil},
		{"a and b failed", func() { r.Failed(svc("a")); r.Failed(svc("b")) }, []string{"a", "b"}},
		{"b succeeded since", func() { r.Succeeded(svc("b")) }, []string{"a"}},
		{"a deleted: forgotten", func() { _ = store.Delete(svc("a")) }, nil},
		{"a back, not failed", func() { _ = store.Add(svc("a")) }, nil},
		{"c failed twice", func() { r.Failed(svc("c")); r.Failed(svc("c")) }, []string{"c"}},
	}
	for _, s := range steps {
		s.do()
		mu.Lock()
		clear(handed)
		mu.Unlock()
		n := r.Retry()
		mu.Lock()
		for id, got := range handed {
			slices.Sort(got)
			if !slices.Equal(got, s.want) {
				t.Errorf("%s: handler %s was handed %v, want %v", s.name, id, got, s.want)
			}
		}
		if len(s.want) > 0 && len(handed) != 3 {
			t.Errorf("%s: %d handlers were handed Services, want all 3", s.name, len(handed))
		}
		mu.Unlock()
		if n != len(s.want) {
			t.Errorf("%s: Retry returned %d, want %d", s.name, n, len(s.want))
		}
	}
}
