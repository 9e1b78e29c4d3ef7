package lbhosts

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
)

// countingLister counts the full listings behind the representative.
type countingLister struct {
	corelisters.NodeLister
	calls int
}

func (c *countingLister) List(s labels.Selector) ([]*v1.Node, error) {
	c.calls++
	return c.NodeLister.List(s)
}

func TestRepresentativeIsComputedOncePerChange(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	add := func(name string) {
		if err := indexer.Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	add("node-b")
	add("node-c")
	clock := testclock.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	lister := &countingLister{NodeLister: corelisters.NewNodeLister(indexer)}
	r := newRepresentative(lister, clock)
	first := func() string {
		t.Helper()
		nodes, err := r.List(labels.Everything())
		if err != nil || len(nodes) != 1 {
			t.Fatalf("List: %v, %v", nodes, err)
		}
		return nodes[0].Name
	}
	for range 1000 { // one call per Service of a node sync
		if got := first(); got != "node-b" {
			t.Fatalf("got %s, want node-b", got)
		}
	}
	if lister.calls != 1 {
		t.Fatalf("%d full listings for 1,000 calls without a change, want 1", lister.calls)
	}
	add("node-a")
	r.invalidate() // what the informer's event handler does
	if got := first(); got != "node-a" || lister.calls != 2 {
		t.Fatalf("after a node event: %s (%d listings), want node-a (2)", got, lister.calls)
	}
	// A change whose event is not handled yet is seen after maxAge.
	if err := indexer.Delete(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}); err != nil {
		t.Fatal(err)
	}
	clock.SetTime(clock.Now().Add(maxAge))
	if got := first(); got != "node-b" {
		t.Fatalf("after MaxAge: %s, want node-b", got)
	}
}
