package lbmodule

// SetListPageSize sets the page size lists use and returns the function
// that restores it (for tests).
func SetListPageSize(n int64) (restore func()) {
	old := listPageSize
	listPageSize = n
	return func() { listPageSize = old }
}

// FailureReason is the syncs_total result label of a failed sync's error.
func FailureReason(err error) string { return string(failureReason(err)) }

// The external tests name these.
type EventRecorder = eventRecorder

var SourceFor = sourceFor

// GatherDelay is how long a change after a quiet spell waits for its sync.
const GatherDelay = gatherDelay

// Running reports whether a sync of the loop runs: tests that move the
// clock "after a sync" wait for its end first.
func (r *Reconciler) Running() bool {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	return r.running
}
