//go:build !linux

package wasmhost

func newLinearMemory(max uint64) linearMemory { return &heapMemory{max: max} }
