//go:build unix

package wasmhost

import (
	"syscall"
	"testing"
)

// cpuPerOp reports the process's CPU time (user + system) per iteration
// when the benchmark ends: on a shared machine wall time measures the
// neighbours as much as the code.
func cpuPerOp(b *testing.B) {
	var start syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &start)
	b.Cleanup(func() {
		var end syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
		used := end.Utime.Nano() + end.Stime.Nano() - start.Utime.Nano() - start.Stime.Nano()
		b.ReportMetric(float64(used)/1e6/float64(b.N), "cpu-ms/op")
	})
}
