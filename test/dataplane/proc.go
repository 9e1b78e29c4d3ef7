package dataplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/proc"
)

// Proc is a child process whose output goes to a log file.
type Proc struct {
	Name string
	Log  string
	proc *proc.Proc
}

// stopGrace is how long Stop waits for a child to end on SIGTERM.
const stopGrace = 5 * time.Second

// Start runs bin with args (and env added to this process's environment),
// logging to dir/name.log. The child dies with the test process (parent-death
// signal), so a crashed test leaves nothing behind.
func Start(dir, name, bin string, args, env []string) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p, err := proc.Start(cmd, f)
	if err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	return &Proc{Name: name, Log: logPath, proc: p}, nil
}

// Pid is the process's ID.
func (p *Proc) Pid() int { return p.proc.Pid() }

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.proc.Done() }

// Err is how the process ended (valid once Done is closed).
func (p *Proc) Err() error { return p.proc.Err() }

// Exited reports whether the process ended, and how.
func (p *Proc) Exited() (bool, error) {
	if !p.proc.Exited() {
		return false, nil
	}
	return true, p.proc.Err()
}

// Stop sends SIGTERM, then SIGKILL after a grace period, and waits.
func (p *Proc) Stop() {
	if p == nil {
		return
	}
	p.proc.Stop(stopGrace)
}

// Kill ends the process at once with SIGKILL (kill -9: no shutdown, no
// lease released) and waits for it.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	p.proc.Stop(0)
}
