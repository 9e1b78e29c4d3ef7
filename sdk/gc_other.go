//go:build !wasip1

package sdk

// tuneGC does nothing natively: tests keep Go's default collector.
func tuneGC(int64) {}
