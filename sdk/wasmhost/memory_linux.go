package wasmhost

import (
	"os"
	"syscall"
	"unsafe"
)

// resident is the length of b up to its last page the kernel has mapped
// (mincore): beyond it b has never been touched and is zero. The whole of b
// if that cannot be told. *buf is mincore's buffer, grown as needed and
// kept by the caller.
func resident(b []byte, buf *[]byte) int {
	if len(b) == 0 {
		return 0
	}
	pg := os.Getpagesize()
	n := (len(b) + pg - 1) / pg
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	vec := (*buf)[:n]
	_, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return len(b)
	}
	for i := len(vec) - 1; i >= 0; i-- {
		if vec[i]&1 != 0 {
			return min((i+1)*pg, len(b))
		}
	}
	return 0
}
