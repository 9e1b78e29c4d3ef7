package testenv

import "syscall"

// childAttr makes the kernel kill etcd and kube-apiserver when the test
// binary dies without running Stop (a panic, a `go test -timeout`, a
// SIGKILL), so they do not outlive it holding ports and CPU.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
