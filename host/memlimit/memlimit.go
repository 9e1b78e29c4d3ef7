// Package memlimit gives the Go runtime a soft memory limit from the
// container's: without one, the garbage collector lets the heap grow to
// twice what is live (GOGC=100) whatever the pod's limit, and a burst of
// garbage (a module call's output at 10,000 Services, a relist) can push
// the process past its limit into an OOM kill. With it, the collector
// works harder as the heap nears the limit instead.
package memlimit

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Fraction of the container's memory limit given to the Go runtime: the
// rest is for what the runtime does not count (thread stacks, the module's
// compiled code) and for headroom.
const Fraction = 0.9

// cgroup files that hold the container's memory limit: v2, then v1.
var limitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Set sets the runtime's soft memory limit to Fraction of the container's
// memory limit, unless GOMEMLIMIT is set (the runtime has read it) or
// there is no limit. It returns what it did, for the start-up log.
func Set() string {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return "GOMEMLIMIT=" + v + " (from the environment)"
	}
	for _, f := range limitFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		limit, ok := Parse(string(b))
		if !ok {
			return "none (the container has no memory limit)"
		}
		soft := int64(float64(limit) * Fraction)
		debug.SetMemoryLimit(soft)
		return fmt.Sprintf("%d MiB (%.0f%% of the container's %d MiB)", soft>>20, Fraction*100, limit>>20)
	}
	return "none (no cgroup memory limit found)"
}

// Parse reads a cgroup memory limit: a byte count, or "max" (v2) or a
// huge number (v1) for none.
func Parse(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}
