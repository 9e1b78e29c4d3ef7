// Package proc runs the child processes of the test machinery (etcd and
// kube-apiserver, a cluster's daemons, MetalLB, routers, the CCM): the
// output into a log file, a parent-death signal on Linux, and a stop that
// asks first and kills after a grace period. The packages that start
// children keep what differs between them (how the log is opened, the
// environment, a network namespace, a cgroup, their messages) and share
// this, so that a child is waited for and its log closed in one way.
package proc

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is a started child process.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has ended and its log is closed
	err  error         // how it ended: cmd.Wait's answer, valid once done is closed
}

// Start starts cmd with its stdout and stderr going to log, which it
// closes when the process has ended (or at once, if it does not start).
// On Linux the kernel kills the child when this process dies (a panic, a
// `go test -timeout`, a SIGKILL), so a crashed test leaves nothing behind
// holding ports and CPU; elsewhere Stop is the only end. The error is
// exec's, for the caller to say what it was starting.
func Start(cmd *exec.Cmd, log *os.File) (*Proc, error) {
	cmd.Stdout, cmd.Stderr = log, log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended; it waits for the end.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Exited reports whether the process has ended; a nil Proc (one never
// started) has not.
func (p *Proc) Exited() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop asks the process to end (SIGTERM) and kills it (SIGKILL) if it has
// not after grace; a grace of 0 or less kills it at once (kill -9: no
// shutdown, no lease released). It returns once the process has ended.
// Stopping a nil Proc, or one that has ended, does nothing.
func (p *Proc) Stop(grace time.Duration) {
	if p == nil || p.Exited() {
		return
	}
	if grace > 0 {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}
