package bgp

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// A node taken from the queue before the first selection keeps its BGP
// annotations: at start-up the node controller's status update queues
// nodes at once, and an empty selection then read as "not a BGP node"
// stripped what this CCM (or upstream, on a take-over) had written.
func TestNoAnnotationChangeBeforeTheFirstSelection(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{
		tmpl.NetworkIPv4Private: "10.1.0.0/25",
	}}}
	kube := fake.NewSimpleClientset(node)
	inf := informers.NewSharedInformerFactory(kube, 0).Core().V1().Nodes()
	if err := inf.Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	c := NewController(nil, kube, inf, nil, record.NewFakeRecorder(10), Options{Templates: tmpl})
	if !c.annotationsMatch(node) {
		t.Error("before any selection, the node's annotations are reported as needing a change")
	}
	if err := c.syncNode(context.Background(), "node-1"); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "patch" || a.GetVerb() == "update" {
			t.Errorf("before any selection the node was written: %v", a)
		}
	}
}
