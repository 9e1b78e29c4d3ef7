//go:build !linux

package testenv

import "syscall"

// childAttr: only Linux can tie a child's life to its parent; elsewhere Stop
// must run.
func childAttr() *syscall.SysProcAttr { return nil }
