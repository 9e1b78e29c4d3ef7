package bgp

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"
)

// TestPrefixBudget: a node is warned once when the addresses it announces
// pass the limit, not every snapshot, and again after its count went under
// and passed the limit anew; nodes of a metro with fewer addresses are not
// warned for another metro's count.
func TestPrefixBudget(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	b := NewPrefixBudget(2, rec)
	steps := []struct {
		announced map[string]int
		want      []string // nodes warned this step
	}{
		{map[string]int{"a": 2, "b": 2}, nil},                   // at the limit: fine
		{map[string]int{"a": 3, "b": 3}, []string{"a", "b"}},    // over: one per node
		{map[string]int{"a": 4, "b": 4}, nil},                   // still over: already warned
		{map[string]int{"a": 4, "b": 4, "c": 3}, []string{"c"}}, // a new node is warned
		{map[string]int{"a": 1, "b": 1, "c": 1}, nil},           // recovered
		{map[string]int{"a": 3}, []string{"a"}},                 // over again: warned again
		{map[string]int{"a": 3, "d": 1}, nil},                   // another metro's node, under: never warned
		{map[string]int{"a": 1, "d": 3}, []string{"d"}},         // its own count passes: warned
	}
	for i, s := range steps {
		b.Check(s.announced)
		var got []string
		for len(rec.Events) > 0 {
			e := <-rec.Events
			if !strings.Contains(e, reasonPrefixLimit) || !strings.Contains(e, "session limit of 2") {
				t.Errorf("step %d: Event %q lacks the reason or the limit", i, e)
			}
			got = append(got, e)
		}
		if len(got) != len(s.want) {
			t.Errorf("step %d (%v): Events %q; want one for each of %v", i, s.announced, got, s.want)
		}
		for j, n := range s.want {
			if j < len(got) && !strings.Contains(got[j], fmt.Sprintf("announces %d Service addresses", s.announced[n])) {
				t.Errorf("step %d: Event %q should name node %s's own count %d", i, got[j], n, s.announced[n])
			}
		}
	}
}
