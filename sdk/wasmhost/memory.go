package wasmhost

import "github.com/tetratelabs/wazero/experimental"

// linearMemory is what backs a pooled instance's memory.
type linearMemory interface {
	experimental.LinearMemory
	// zero zeroes bytes [from, to) of the memory.
	zero(from, to uint64)
	// touched is a length beyond which the memory is known to be zero.
	touched() int
}

// heapMemory is a plain slice, where a mapping is not available.
type heapMemory struct {
	buf []byte
	max uint64
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size > uint64(len(m.buf)) {
		m.buf = append(m.buf, make([]byte, size-uint64(len(m.buf)))...)
	}
	return m.buf[:size]
}

func (m *heapMemory) Free() { m.buf = nil }

func (m *heapMemory) zero(from, to uint64) { clear(m.buf[from:to]) }

func (m *heapMemory) touched() int { return len(m.buf) }
