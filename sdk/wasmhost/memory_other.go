//go:build !(linux || darwin || freebsd)

package wasmhost

func newLinearMemory(max uint64) linearMemory { return &heapMemory{max: max} }
