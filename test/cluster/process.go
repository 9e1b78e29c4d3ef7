//go:build linux

package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/proc"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// process is a child (containerd, kubelet) in a node's netns whose output
// goes to a log file.
type process struct {
	name    string
	logPath string
	proc    *proc.Proc
}

// startInNS starts bin in the netns ns through nsenter (which execs it, so
// the pid is bin's), or in the host's netns if ns is "", and moves it into
// cgroup (every v1 hierarchy) before it has started anything of its own.
// The kernel kills it when the test binary dies without Stop (proc.Start).
// The shims and containers containerd starts are not covered: Stop finds
// them through the cgroups.
func startInNS(name, ns, cgroup, bin, logPath string, args []string) (*process, error) {
	return startAs("", name, ns, cgroup, bin, logPath, args)
}

// startAs is startInNS in a UTS namespace of its own named host (none
// when ""): a node's containerd runs so, and the pods that share their
// node's namespaces (hostNetwork) see the node's name as hostname, as on
// a machine of their own, not this one's.
func startAs(host, name, ns, cgroup, bin, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: creating %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	if ns != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, "--", bin}, args...)...)
	}
	if host != "" {
		// Each step execs the next: the process keeps its PID.
		cmd = exec.Command("unshare", append([]string{"--uts", "--", "sh", "-c", `hostname "$0" && exec "$@"`, host}, cmd.Args...)...)
	}
	pr, err := proc.Start(cmd, logFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: starting %s: %w", bin, err)
	}
	p := &process{name: name, logPath: logPath, proc: pr}
	if err := joinCgroup(cgroup, pr.Pid()); err != nil {
		p.stop(0)
		return nil, err
	}
	return p, nil
}

func (p *process) exited() bool {
	if p == nil {
		return false
	}
	return p.proc.Exited()
}

// stop sends SIGTERM and kills after grace (at once for 0).
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	p.proc.Stop(grace)
}

func (p *process) earlyExit() error {
	return fmt.Errorf("cluster: %s exited (%v); log %s ends with:\n%s", p.name, p.proc.Err(), p.logPath, testenv.LogTail(p.logPath, 15))
}
