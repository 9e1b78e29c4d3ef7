//go:build linux

package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// process is a child (containerd, kubelet) in a node's netns whose output
// goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

// startInNS starts bin in the netns ns through nsenter (which execs it, so
// the pid is bin's), or in the host's netns if ns is "", and moves it into
// cgroup (every v1 hierarchy) before it has started anything of its own.
func startInNS(name, ns, cgroup, bin, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: creating %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	if ns != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, "--", bin}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The kernel kills it when the test binary dies without Stop. (The
	// shims and containers containerd starts are not covered: Stop finds
	// them through the cgroups.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("cluster: starting %s: %w", bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := joinCgroup(cgroup, cmd.Process.Pid); err != nil {
		p.stop(0)
		return nil, err
	}
	return p, nil
}

func (p *process) exited() bool {
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

// stop sends SIGTERM and kills after grace (at once for 0).
func (p *process) stop(grace time.Duration) {
	if p == nil || p.exited() {
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

func (p *process) earlyExit() error {
	return fmt.Errorf("cluster: %s exited (%v); log %s ends with:\n%s", p.name, p.waitErr, p.logPath, testenv.LogTail(p.logPath, 15))
}
