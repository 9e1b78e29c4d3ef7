package dataplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Proc is a child process whose output goes to a log file.
type Proc struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

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
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended (valid once Done is closed).
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Exited reports whether the process ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, then SIGKILL after a grace period, and waits.
func (p *Proc) Stop() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill ends the process at once with SIGKILL (kill -9: no shutdown, no
// lease released) and waits for it.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}
