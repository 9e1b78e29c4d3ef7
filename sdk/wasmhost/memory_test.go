//go:build linux

package wasmhost

import (
	"bytes"
	"testing"
)

// A reset zeroes everything above the snapshot, whether it clears the
// touched pages in place (a little) or hands them back (a lot), and leaves
// the snapshot's part alone.
func TestZeroLeavesNothingAboveTheSnapshot(t *testing.T) {
	const size, from = 64 << 20, 1 << 20
	for _, tc := range []struct {
		name    string
		touched int
	}{
		{"nothing touched", 0},
		{"a little, cleared in place", 3 << 20},
		{"exactly the threshold", clearBelow},
		{"more than the threshold, handed back", clearBelow + 5<<20},
		{"all of it", size - from},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newLinearMemory(size)
			defer m.Free()
			buf := m.Reallocate(size)
			if len(buf) != size {
				t.Fatalf("memory of %d bytes, want %d", len(buf), size)
			}
			snapshot := bytes.Repeat([]byte{0x5a}, from)
			copy(buf, snapshot)
			for i := from; i < from+tc.touched; i += 4096 {
				buf[i], buf[i+4095] = 0xaa, 0xbb
			}
			m.zero(from, size)
			if !bytes.Equal(buf[:from], snapshot) {
				t.Errorf("the snapshot's part changed")
			}
			if i := bytes.IndexFunc(buf[from:], func(r rune) bool { return r != 0 }); i >= 0 {
				t.Errorf("byte %d above the snapshot is not zero after the reset", from+i)
			}
		})
	}
}
