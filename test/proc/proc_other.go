//go:build !linux

package proc

import "os/exec"

// dieWithParent: only Linux can tie a child's life to its parent's;
// elsewhere Stop is the only end of a child.
func dieWithParent(*exec.Cmd) {}
