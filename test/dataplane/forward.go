package dataplane

import (
	"io"
	"net"
	"sync"
)

// Forward accepts connections on ln and joins each to a connection from
// dial, byte for byte, until ln is closed. A private network namespace
// cannot be reached from outside, but a Unix socket on the shared file
// system can: the sandbox forwards a TCP port outside to a socket, and the
// socket to kube-apiserver inside, so kubectl on the host still works.
// TLS passes through untouched.
func Forward(ln net.Listener, dial func() (net.Conn, error)) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := dial()
			if err != nil {
				return
			}
			defer out.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				// Half-close, so the other direction can finish its answer.
				if c, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = c.CloseWrite()
				}
			}
			go pipe(out, in)
			go pipe(in, out)
			wg.Wait()
		}()
	}
}
