package controlplane

import (
	"strings"
	"testing"
	"time"
)

func healthy(n int) health { return health{Probed: true, Successes: n} }
func failing(n int) health { return health{Probed: true, Failures: n} }
func node(name, dev string, h health) nodeState {
	return nodeState{Name: name, DeviceID: dev, Health: h}
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := policy{Failures: 3, Rise: 2, Grace: 10 * time.Second}
	onA := []assignment{{ID: "as-a", DeviceID: "dev-a"}}
	cordoned := func(n nodeState) nodeState { n.Unschedulable = true; return n }
	deleting := func(n nodeState) nodeState { n.Deleting = true; return n }
	in := func(metro string, n nodeState) nodeState { n.Metro = metro; return n }

	tests := []struct {
		name        string
		assignments []assignment
		holder      health
		since       time.Duration // how long before Now the holder appeared
		nodes       []nodeState
		eipMetro    string // "" = an EIP bound to no metro
		wantKind    actionKind
		wantTarget  string
		wantUnassig []string
		wantReason  string
	}{
		{
			name: "healthy holder stays", assignments: onA, holder: healthy(10), since: time.Hour,
			nodes:    []nodeState{node("a", "dev-a", healthy(10)), node("b", "dev-b", healthy(10))},
			wantKind: keep,
		},
		{
			name: "two failures below threshold of three stay", assignments: onA, holder: failing(2), since: time.Hour,
			nodes:    []nodeState{node("a", "dev-a", failing(2)), node("b", "dev-b", healthy(10))},
			wantKind: keep,
		},
		{
			name: "threshold reached moves to healthy node", assignments: onA, holder: failing(3), since: time.Hour,
			nodes:    []nodeState{node("a", "dev-a", failing(3)), node("b", "dev-b", healthy(10))},
			wantKind: move, wantTarget: "b", wantUnassig: []string{"as-a"}, wantReason: "failed 3 health checks",
		},
		{
			name: "failures inside the grace after a move do not count", assignments: onA, holder: failing(5), since: 5 * time.Second,
			nodes:    []nodeState{node("a", "dev-a", healthy(1)), node("b", "dev-b", healthy(10))},
			wantKind: keep,
		},
		{
			name: "stable order: first healthy node by name, whatever the input order", assignments: onA, holder: failing(3), since: time.Hour,
			nodes:    []nodeState{node("d", "dev-d", healthy(9)), node("a", "dev-a", failing(3)), node("c", "dev-c", healthy(9)), node("b", "dev-b", failing(1))},
			wantKind: move, wantTarget: "c", wantUnassig: []string{"as-a"},
		},
		{
			name: "a node that just came back is not trusted yet (rise)", assignments: onA, holder: failing(3), since: time.Hour,
			nodes:    []nodeState{node("a", "dev-a", failing(3)), node("b", "dev-b", healthy(1)), node("c", "dev-c", healthy(2))},
			wantKind: move, wantTarget: "c",
		},
		{
			name: "cordoned holder moves even though it answers", assignments: onA, holder: healthy(10), since: time.Hour,
			nodes:    []nodeState{cordoned(node("a", "dev-a", healthy(10))), node("b", "dev-b", healthy(10))},
			wantKind: move, wantTarget: "b", wantUnassig: []string{"as-a"}, wantReason: "cordoned",
		},
		{
			name: "cordoned holder with nowhere to go stays", assignments: onA, holder: healthy(10), since: time.Hour,
			nodes:    []nodeState{cordoned(node("a", "dev-a", healthy(10))), node("b", "dev-b", failing(4))},
			wantKind: stuck, wantReason: "cordoned",
		},
		{
			name: "holder being deleted moves", assignments: onA, holder: healthy(10), since: time.Hour,
			nodes:    []nodeState{deleting(node("a", "dev-a", healthy(10))), node("b", "dev-b", healthy(10))},
			wantKind: move, wantTarget: "b", wantReason: "being deleted",
		},
		{
			name: "holder device that is no control-plane node (deleted) moves", assignments: onA, holder: health{}, since: time.Hour,
			nodes:    []nodeState{node("b", "dev-b", healthy(10)), node("c", "dev-c", healthy(10))},
			wantKind: move, wantTarget: "b", wantReason: "not a control-plane node",
		},
		{
			name: "holder unknown while a node has no provider ID yet (start-up): keep", assignments: onA, holder: health{}, since: time.Hour,
			nodes:    []nodeState{{Name: "a", Uninitialized: true, Health: healthy(3)}, node("b", "dev-b", healthy(10))},
			wantKind: keep, wantReason: "holder device dev-a may be node a, which has no provider ID yet",
		},
		{
			name: "holder unknown, the node without a device has another cloud's provider ID: move", assignments: onA, holder: health{}, since: time.Hour,
			nodes:    []nodeState{node("a", "", healthy(3)), node("b", "dev-b", healthy(10))},
			wantKind: move, wantTarget: "b", wantReason: "not a control-plane node",
		},
		{
			name: "no healthy node: the EIP stays and is reported", assignments: onA, holder: failing(7), since: time.Hour,
			nodes:    []nodeState{node("a", "dev-a", failing(7)), node("b", "dev-b", failing(7)), node("c", "dev-c", health{})},
			wantKind: stuck, wantReason: "none of the 3 control-plane nodes is eligible",
		},
		{
			name: "a cordoned node that answers beats a dead holder", assignments: onA, holder: failing(3), since: time.Hour,
			nodes:    []nodeState{node("a", "dev-a", failing(3)), cordoned(node("b", "dev-b", healthy(5))), node("c", "dev-c", failing(3))},
			wantKind: move, wantTarget: "b",
		},
		{
			name: "schedulable candidates come before cordoned ones", assignments: onA, holder: failing(3), since: time.Hour,
			nodes:    []nodeState{node("a", "dev-a", failing(3)), cordoned(node("b", "dev-b", healthy(5))), node("c", "dev-c", healthy(5))},
			wantKind: move, wantTarget: "c",
		},
		{
			name: "nodes without provider ID or being deleted are never targets", assignments: onA, holder: failing(3), since: time.Hour,
			nodes:    []nodeState{node("a", "dev-a", failing(3)), node("b", "", healthy(9)), deleting(node("c", "dev-c", healthy(9)))},
			wantKind: stuck,
		},
		{
			name: "unassigned EIP (interrupted move) is repaired, rise waived", assignments: nil,
			nodes:    []nodeState{node("a", "dev-a", failing(3)), node("b", "dev-b", healthy(1))},
			wantKind: assign, wantTarget: "b", wantReason: "no assignment",
		},
		{
			name: "unassigned EIP with no healthy node stays unassigned and is reported", assignments: nil,
			nodes:    []nodeState{node("a", "dev-a", failing(3))},
			wantKind: stuck, wantReason: "no assignment",
		},
		{
			name: "unassigned EIP with no control-plane nodes", assignments: nil,
			wantKind: stuck, wantReason: "there are no control-plane nodes",
		},
		{
			name:        "two assignments: keep the healthy node's, remove the other",
			assignments: []assignment{{ID: "as-a", DeviceID: "dev-a"}, {ID: "as-b", DeviceID: "dev-b"}, {ID: "as-x", DeviceID: "dev-x"}},
			nodes:       []nodeState{node("a", "dev-a", failing(3)), node("b", "dev-b", healthy(3))},
			wantKind:    trim, wantUnassig: []string{"as-a", "as-x"}, wantReason: "keeping the one on device dev-b",
		},
		// Equinix assigns an EIP only to a device in its metro; a move
		// unassigns first, so a candidate elsewhere would leave it on nobody.
		{
			name: "failover stays in the EIP's metro, skipping an earlier healthy node elsewhere", assignments: onA, holder: failing(3), since: time.Hour, eipMetro: "da",
			nodes:    []nodeState{in("da", node("a", "dev-a", failing(3))), in("sv", node("b", "dev-b", healthy(9))), in("da", node("c", "dev-c", healthy(9)))},
			wantKind: move, wantTarget: "c", wantUnassig: []string{"as-a"},
		},
		{
			name: "metro codes compare without case", assignments: onA, holder: failing(3), since: time.Hour, eipMetro: "DA",
			nodes:    []nodeState{in("da", node("a", "dev-a", failing(3))), in("da", node("b", "dev-b", healthy(9)))},
			wantKind: move, wantTarget: "b",
		},
		{
			name: "only other metros are healthy: the EIP stays and the reason says why", assignments: onA, holder: failing(3), since: time.Hour, eipMetro: "da",
			nodes:    []nodeState{in("da", node("a", "dev-a", failing(3))), in("sv", node("b", "dev-b", healthy(9))), in("ny", node("c", "dev-c", healthy(9)))},
			wantKind: stuck, wantReason: "none of the 1 control-plane nodes in metro da is eligible (healthy, with a provider ID, not being deleted); healthy nodes in other metros (b in sv, c in ny) cannot take it, since Equinix assigns an Elastic IP only in its own metro: add a control-plane node in da, so the EIP stays",
		},
		{
			name: "a node whose metro is unknown is not a candidate for a metro EIP", assignments: onA, holder: failing(3), since: time.Hour, eipMetro: "da",
			nodes:    []nodeState{in("da", node("a", "dev-a", failing(3))), node("b", "dev-b", healthy(9))},
			wantKind: stuck, wantReason: "b in an unknown metro",
		},
		{
			name: "cordoned holder with a healthy node only in another metro stays", assignments: onA, holder: healthy(10), since: time.Hour, eipMetro: "da",
			nodes:    []nodeState{cordoned(in("da", node("a", "dev-a", healthy(10)))), in("sv", node("b", "dev-b", healthy(10)))},
			wantKind: stuck, wantReason: "cordoned",
		},
		{
			name: "unassigned EIP goes to a node in its metro only", assignments: nil, eipMetro: "sv",
			nodes:    []nodeState{in("da", node("a", "dev-a", healthy(5))), in("sv", node("b", "dev-b", healthy(1)))},
			wantKind: assign, wantTarget: "b",
		},
		{
			name: "unassigned EIP with healthy nodes only elsewhere stays unassigned and says so", assignments: nil, eipMetro: "sv",
			nodes:    []nodeState{in("da", node("a", "dev-a", healthy(5)))},
			wantKind: stuck, wantReason: "the EIP has no assignment and none of the 0 control-plane nodes in metro sv",
		},
		{
			name: "an EIP bound to no metro may go anywhere", assignments: onA, holder: failing(3), since: time.Hour,
			nodes:    []nodeState{in("da", node("a", "dev-a", failing(3))), in("sv", node("b", "dev-b", healthy(9)))},
			wantKind: move, wantTarget: "b",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(2 * time.Hour)
			d := decide(input{
				Now: now, Assignments: tc.assignments, HolderHealth: tc.holder,
				HolderSince: now.Add(-tc.since), Nodes: tc.nodes, Policy: pol, EIPMetro: tc.eipMetro,
			})
			if d.Kind != tc.wantKind {
				t.Fatalf("kind = %v (%s), want %v", d.Kind, d.Reason, tc.wantKind)
			}
			if d.Target.Name != tc.wantTarget {
				t.Errorf("target = %q, want %q", d.Target.Name, tc.wantTarget)
			}
			if tc.wantUnassig != nil {
				var got []string
				for _, a := range d.Unassign {
					got = append(got, a.ID)
				}
				if strings.Join(got, ",") != strings.Join(tc.wantUnassig, ",") {
					t.Errorf("unassign = %v, want %v", got, tc.wantUnassig)
				}
			}
			if !strings.Contains(d.Reason, tc.wantReason) {
				t.Errorf("reason = %q, want it to contain %q", d.Reason, tc.wantReason)
			}
		})
	}
}

func TestHealthRecord(t *testing.T) {
	tests := []struct {
		seq  string // o = pass, x = fail
		want health
	}{
		{"", health{}},
		{"o", health{Probed: true, Successes: 1}},
		{"xxo", health{Probed: true, Successes: 1}},
		{"ooxx", health{Probed: true, Failures: 2}},
		{"xoxoo", health{Probed: true, Successes: 2}},
	}
	for _, tc := range tests {
		var h health
		for _, c := range tc.seq {
			h = h.Record(c == 'o')
		}
		if h != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.seq, h, tc.want)
		}
		if want := tc.want.Successes > 0; h.Healthy() != want {
			t.Errorf("%q: Healthy() = %v, want %v", tc.seq, h.Healthy(), want)
		}
	}
}

// TestDecideSequences replays probe sequences round by round, the way the
// manager does, and counts where the EIP goes. It shows the hysteresis:
// intermittent failures never move the EIP, and two nodes that take turns
// failing do not toss it back and forth faster than the thresholds allow.
func TestDecideSequences(t *testing.T) {
	pol := policy{Failures: 3, Rise: 2}
	tests := []struct {
		name string
		// per node, one character per round: o = probe passes, x = fails
		probes    map[string]string
		wantPath  string // holders after each move, starting with the first holder
		wantMoves int
	}{
		{
			name:     "one failure in three never moves",
			probes:   map[string]string{"a": "ooxooxooxooxooxoox", "b": "oooooooooooooooooo"},
			wantPath: "a",
		},
		{
			name:     "two flapping nodes, each failing one in three: no move",
			probes:   map[string]string{"a": "xooxooxooxooxoo", "b": "oxooxooxooxooxo"},
			wantPath: "a",
		},
		{
			name:     "failing two in a row, never three: no move",
			probes:   map[string]string{"a": "oxxoxxoxxoxxoxx", "b": "ooooooooooooooo"},
			wantPath: "a",
		},
		{
			name:      "holder dies: one move to the first healthy node",
			probes:    map[string]string{"a": "oooxxxxxxxxx", "b": "oooooooooooo", "c": "oooooooooooo"},
			wantPath:  "a,b",
			wantMoves: 1,
		},
		{
			name: "holder dies while the other just recovered: wait for rise, then move",
			// b comes back at round 4; a reaches 3 failures at round 3 but b
			// has only 1 pass at round 4 and 2 at round 5.
			probes:    map[string]string{"a": "oxxxxxxx", "b": "xxxoooo"},
			wantPath:  "a,b",
			wantMoves: 1,
		},
		{
			name: "two nodes taking turns to be down: one move per real outage, never back on a half-up node",
			// a down rounds 1-4; b down rounds 5-9 while a answers again from 5.
			probes:    map[string]string{"a": "oxxxxoooooooo", "b": "ooooxxxxxoooo"},
			wantPath:  "a,b,a",
			wantMoves: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names := []string{"a", "b", "c"}
			rounds := 0
			for _, s := range tc.probes {
				rounds = max(rounds, len(s))
			}
			hist := map[string]health{}
			holder := "a"
			var holderHealth health
			path := []string{holder}
			moves := 0
			for r := 0; r < rounds; r++ {
				var nodes []nodeState
				for _, n := range names {
					seq, ok := tc.probes[n]
					if !ok {
						continue
					}
					pass := r >= len(seq) || seq[r] == 'o'
					hist[n] = hist[n].Record(pass)
					if n == holder {
						holderHealth = holderHealth.Record(pass)
					}
					nodes = append(nodes, node(n, "dev-"+n, hist[n]))
				}
				d := decide(input{
					Now:          time.Unix(int64(r), 0),
					Assignments:  []assignment{{ID: "as-" + holder, DeviceID: "dev-" + holder}},
					HolderHealth: holderHealth, HolderSince: time.Unix(0, 0),
					Nodes: nodes, Policy: pol,
				})
				if d.Kind == move {
					moves++
					holder = d.Target.Name
					holderHealth = health{}
					path = append(path, holder)
				}
			}
			if got := strings.Join(path, ","); got != tc.wantPath || moves != tc.wantMoves {
				t.Fatalf("path %s with %d moves, want %s with %d", got, moves, tc.wantPath, tc.wantMoves)
			}
		})
	}
}
