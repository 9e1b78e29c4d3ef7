//go:build !linux

package dataplane

import "os/exec"

// dieWithParent: only Linux has a parent-death signal; the data plane
// (user and network namespaces) runs only there anyway.
func dieWithParent(*exec.Cmd) {}
