//go:build linux

package wasmhost

import "syscall"

// newLinearMemory backs an instance's linear memory with one anonymous
// mapping of the module's maximum size, reserved up front: growing is a
// reslice (wazero's default appends, copying the whole memory each time),
// untouched pages cost no RSS, and zeroing a range hands its pages back to
// the kernel (madvise), at a cost that follows the pages a call touched
// rather than the size of the memory.
func newLinearMemory(max uint64) linearMemory {
	b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return &heapMemory{max: max}
	}
	return &mmapMemory{buf: b}
}

type mmapMemory struct {
	buf []byte
	vec []byte // mincore's answer, kept between resets
}

// clearBelow is how much touched memory a reset clears in place rather than
// hands back to the kernel. Handing pages back makes the next call fault
// every page it touches in again, freshly zeroed: for the MetalLB module at
// 1,000 Services (3 MiB touched) that was 1-2 ms of a 35 ms call
// (BenchmarkGenerateMetalLB1000x100, interleaved A/B runs), so an idle
// instance keeps up to this much resident. Beyond
// it (a large cluster's calls), the pages go back: the RSS matters more there
// than a few milliseconds.
const clearBelow = 16 << 20

func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size]
}

func (m *mmapMemory) Free() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}

// zero zeroes buf[from:to], page-aligned offsets into the mapping: what
// the calls touched in place if that is little, else by madvise.
func (m *mmapMemory) zero(from, to uint64) {
	end := uint64(resident(m.buf[:to], &m.vec))
	if end <= from {
		return
	}
	if end-from <= clearBelow {
		clear(m.buf[from:end])
		return
	}
	if err := syscall.Madvise(m.buf[from:to], syscall.MADV_DONTNEED); err != nil {
		clear(m.buf[from:to])
	}
}

func (m *mmapMemory) touched() int { return resident(m.buf, &m.vec) }
