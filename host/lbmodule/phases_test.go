package lbmodule

import (
	"testing"
	"time"
)

// A sync's busy time, by which MarkDirty spaces the next sync, is the
// phases that cost this process CPU; the waits for the API server (read,
// live, write, prune, annotations) are not.
func TestPhaseClockBusy(t *testing.T) {
	tests := []struct {
		name   string
		phases []string
		each   time.Duration
		want   time.Duration
	}{
		{"a whole sync", []string{"read", "snapshot", "generate", "live", "write", "prune", "annotations"}, time.Second, 2 * time.Second},
		{"failed after the snapshot", []string{"read", "snapshot"}, 300 * time.Millisecond, 300 * time.Millisecond},
		{"failed reading", []string{"read"}, time.Second, 0},
		{"nothing timed", nil, time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			p := newPhaseClock(func() time.Time { return now })
			for _, ph := range tt.phases {
				now = now.Add(tt.each)
				p.end(ph)
			}
			if p.busy != tt.want {
				t.Errorf("busy %v, want %v", p.busy, tt.want)
			}
		})
	}
}
