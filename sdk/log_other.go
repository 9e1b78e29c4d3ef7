//go:build !wasip1

package sdk

import (
	"fmt"
	"io"
	"sync"
)

var (
	logMu  sync.Mutex
	logOut io.Writer = io.Discard
)

// SetLogOutput sends Logf output to w when the module runs natively (in
// tests); in Wasm it always goes to the host's log. It returns the previous
// writer.
func SetLogOutput(w io.Writer) io.Writer {
	logMu.Lock()
	defer logMu.Unlock()
	prev := logOut
	logOut = w
	return prev
}

func writeLog(level Level, msg string) {
	logMu.Lock()
	defer logMu.Unlock()
	fmt.Fprintf(logOut, "%s %s\n", level, msg)
}
