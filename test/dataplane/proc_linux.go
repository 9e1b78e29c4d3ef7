package dataplane

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the child when this process dies, so a
// crashed test or sandbox leaves nothing behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
