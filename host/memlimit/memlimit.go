// Package memlimit gives the Go runtime a soft memory limit from the
// container's: without one, the garbage collector lets the heap grow to
// twice what is live (GOGC=100) whatever the pod's limit, and a burst of
// garbage (a module call's output at 10,000 Services, a relist) can push
// the process past its limit into an OOM kill. With it, the collector
// works harder as the heap nears the limit instead.
//
// A load-balancer module's memory is not the Go heap: wazero maps it
// outside, and the runtime's limit does not see it. A module call at
// 10,000 Services fills much of its memory (its own collector runs only
// near its limit) while the host holds the call's input and output, so the
// module's limit is taken off the container's before the share is given
// to the runtime.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package memlimit

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// fraction of the container's memory limit (less the module's) given to
// the Go runtime: the rest is for what the runtime does not count (thread
// stacks, the module's compiled code) and for headroom.
const fraction = 0.9

// minSoft is the smallest limit worth giving the runtime: below it the
// collector would run all the time. When the module's limit leaves less,
// the module's memory is not reserved and the start-up log says so.
const minSoft = 64 << 20

// cgroup files that hold the container's memory limit: v2, then v1.
var limitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Set sets the runtime's soft memory limit from the container's memory
// limit (see Soft), unless GOMEMLIMIT is set (the runtime has read it) or
// there is no limit. reserved is the memory a load-balancer module may
// use (0 without one). It returns what it did, for the start-up log, and a
// warning when the module's limit leaves the runtime too little.
func Set(reserved int64) (did, warning string) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return "GOMEMLIMIT=" + v + " (from the environment)", ""
	}
	for _, f := range limitFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		limit, ok := parse(string(b))
		if !ok {
			return "none (the container has no memory limit)", ""
		}
		soft, note, ok := Soft(limit, reserved)
		debug.SetMemoryLimit(soft)
		if !ok {
			warning = fmt.Sprintf("the load-balancer module's memory limit (%d MiB) leaves too little of the container's (%d MiB): a module call may push the pod past its limit; lower moduleMemoryLimitMiB or raise the container's memory limit", reserved>>20, limit>>20)
		}
		return fmt.Sprintf("%d MiB (%s)", soft>>20, note), warning
	}
	return "none (no cgroup memory limit found)", ""
}

// Soft is the runtime's share of a container memory limit when a module
// may use reserved bytes of it: fraction of what the module leaves. If
// that is under 64 MiB, it is fraction of the whole limit instead, and ok
// is false.
func Soft(limit, reserved int64) (soft int64, note string, ok bool) {
	if reserved > 0 {
		if soft := int64(float64(limit-reserved) * fraction); soft >= minSoft {
			return soft, fmt.Sprintf("%.0f%% of the container's %d MiB less the load-balancer module's %d MiB", fraction*100, limit>>20, reserved>>20), true
		}
	}
	soft = int64(float64(limit) * fraction)
	return soft, fmt.Sprintf("%.0f%% of the container's %d MiB", fraction*100, limit>>20), reserved == 0
}

// parse reads a cgroup memory limit: a byte count, or "max" (v2) or a
// huge number (v1) for none.
func parse(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}
