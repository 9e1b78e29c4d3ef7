package proc

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the child when this process dies,
// keeping whatever else cmd.SysProcAttr asks for.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
