package bgp

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"
)

// TestPrefixBudget: a node is warned once when the announced addresses pass
// the limit, not every snapshot, and again after the count recovered and
// passed the limit anew.
func TestPrefixBudget(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	b := NewPrefixBudget(2, rec)
	steps := []struct {
		addresses int
		nodes     []string
		want      int // Events this step
	}{
		{2, []string{"a", "b"}, 0},      // at the limit: fine
		{3, []string{"a", "b"}, 2},      // over: one per node
		{4, []string{"a", "b"}, 0},      // still over: already warned
		{4, []string{"a", "b", "c"}, 1}, // a new node is warned
		{1, []string{"a", "b", "c"}, 0}, // recovered
		{3, []string{"a"}, 1},           // over again: warned again
	}
	for i, s := range steps {
		b.Check(s.addresses, s.nodes)
		got := len(rec.Events)
		for range got {
			e := <-rec.Events
			if !strings.Contains(e, reasonPrefixLimit) || !strings.Contains(e, "session limit of 2") {
				t.Errorf("step %d: Event %q lacks the reason or the limit", i, e)
			}
		}
		if got != s.want {
			t.Errorf("step %d (%d addresses, nodes %v): %d Events; want %d", i, s.addresses, s.nodes, got, s.want)
		}
	}
}
