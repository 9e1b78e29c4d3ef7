package faults

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report is what a run measured and found.
type Report struct {
	Options Options
	// The churn: cycles done, Services deleted before their address,
	// Services without an address after IPTimeout.
	EarlyDeletes int
	IPTimeouts   []string
	TimesToIP    []time.Duration
	// Faults injected by kind (emulator.Fault* names), and every Equinix
	// API request.
	Faults   map[string]int64
	Requests int64
	// Kills done (LeaderKills of them the leader); restarts after a lost
	// lease; exits that were neither (crashes).
	Kills, LeaderKills, LeaseLosses int
	Crashes                         []string
	ChurnDuration                   time.Duration
	// Converged is whether every invariant held within ConvergeTimeout of
	// the faults stopping, after ConvergedAfter; else Problems are the
	// invariants still broken.
	Converged      bool
	ConvergedAfter time.Duration
	Problems       []string
	// MaxReservationsPerService is the most reservations seen at once for
	// one Service during the whole run (1 when never duplicated).
	MaxReservationsPerService  int
	LiveServices, Reservations int
}

// Percentile is the p-th percentile (0..100) of ds, nearest rank; 0 when
// ds is empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func (r *Report) String() string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "fault-injection run: 2 CCM replicas (leader election), 3 nodes, %d Services kept\n", o.Keep)
	fmt.Fprintf(&b, "  cycles             %d Service create/delete (%d at once; %d deleted before their address)\n", o.Cycles, o.Parallel, r.EarlyDeletes)
	fmt.Fprintf(&b, "  faults injected    %d of %d Equinix API requests (rate %.0f%%): %s\n", total(r.Faults), r.Requests, o.FaultRate*100, kinds(r.Faults, o.LostFor))
	fmt.Fprintf(&b, "  kills              %d kill -9 (%d of the leader); %d restarts after a lost lease; %d crashes\n", r.Kills, r.LeaderKills, r.LeaseLosses, len(r.Crashes))
	fmt.Fprintf(&b, "  time to IP         p50 %v  p99 %v  max %v  (%d Services; %d without an address after %v)\n",
		Percentile(r.TimesToIP, 50).Round(time.Millisecond), Percentile(r.TimesToIP, 99).Round(time.Millisecond),
		Percentile(r.TimesToIP, 100).Round(time.Millisecond), len(r.TimesToIP), len(r.IPTimeouts), o.IPTimeout)
	fmt.Fprintf(&b, "  churn              %v with faults on\n", r.ChurnDuration.Round(time.Millisecond))
	if r.Converged {
		fmt.Fprintf(&b, "  converged          %v after the faults stopped: %d live Services, %d reservations\n", r.ConvergedAfter.Round(time.Millisecond), r.LiveServices, r.Reservations)
	} else {
		fmt.Fprintf(&b, "  NOT converged      %v after the faults stopped: %s\n", r.ConvergedAfter.Round(time.Millisecond), Summary(r.Problems, 10))
	}
	leaked, dup := 0, 0
	for _, p := range r.Problems {
		leaked += b2i(strings.HasPrefix(p, "leaked"))
		dup += b2i(strings.HasPrefix(p, "duplicate"))
	}
	fmt.Fprintf(&b, "  leaked             %d reservations\n", leaked)
	fmt.Fprintf(&b, "  duplicates         %d at the end; at most %d reservation(s) for one Service at any time\n", dup, r.MaxReservationsPerService)
	for _, c := range r.Crashes {
		fmt.Fprintf(&b, "  crash: %s\n", c)
	}
	return b.String()
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func kinds(m map[string]int64, lostFor time.Duration) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := k
		if k == "lost" {
			name = fmt.Sprintf("lost for %v", lostFor)
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}
