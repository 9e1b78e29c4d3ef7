//go:build !unix

package wasmhost

import "testing"

// cpuPerOp reports nothing where getrusage is missing.
func cpuPerOp(*testing.B) {}
