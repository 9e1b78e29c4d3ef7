package lbhosts

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFirst(t *testing.T) {
	node := func(name string, edit func(*v1.Node)) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if edit != nil {
			edit(n)
		}
		return n
	}
	now := metav1.Now()
	excluded := func(v string) func(*v1.Node) {
		return func(n *v1.Node) { n.Labels[v1.LabelNodeExcludeBalancers] = v }
	}
	deleting := func(n *v1.Node) { n.DeletionTimestamp = &now }
	autoscaled := func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{{Key: "other", Effect: v1.TaintEffectNoSchedule}, {Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoSchedule}}
	}
	cases := []struct {
		name  string
		nodes []*v1.Node
		want  string // "" for none
	}{
		{"no nodes", nil, ""},
		{"the first by name, whatever the order", []*v1.Node{node("c", nil), node("a", nil), node("b", nil)}, "a"},
		{"an excluded node is skipped", []*v1.Node{node("a", excluded("true")), node("b", nil)}, "b"},
		{"exclusion false counts as not excluded", []*v1.Node{node("a", excluded("false")), node("b", nil)}, "a"},
		{"an unparsable exclusion excludes", []*v1.Node{node("a", excluded("")), node("b", nil)}, "b"},
		{"a node being deleted is skipped", []*v1.Node{node("a", deleting), node("b", nil)}, "b"},
		{"a node the autoscaler deletes is skipped", []*v1.Node{node("a", autoscaled), node("b", nil)}, "b"},
		{"no eligible node: none (the controller warns)", []*v1.Node{node("a", excluded("true")), node("b", deleting)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := first(c.nodes)
			switch {
			case c.want == "" && len(got) != 0:
				t.Errorf("got %s, want none", got[0].Name)
			case c.want != "" && (len(got) != 1 || got[0].Name != c.want):
				t.Errorf("got %v, want [%s]", got, c.want)
			}
		})
	}
}
