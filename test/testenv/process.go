package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/proc"
)

// process is a child (etcd or kube-apiserver) whose output goes to a log
// file in the work directory.
type process struct {
	name    string
	logPath string
	proc    *proc.Proc
}

// startProcess starts bin with args, appending its output to the log at
// logPath: a start retried on new ports writes to the same log.
func startProcess(name, bin, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: creating %s log: %w", name, err)
	}
	p, err := proc.Start(exec.Command(bin, args...), logFile)
	if err != nil {
		return nil, fmt.Errorf("testenv: starting %s: %w", bin, err)
	}
	return &process{name: name, logPath: logPath, proc: p}, nil
}

func (p *process) exited() bool { return p.proc.Exited() }

// stop asks the process to end (SIGTERM), and kills it if it has not after
// grace; a grace of 0 kills it at once.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	p.proc.Stop(grace)
}

// earlyExit describes a child that ended before it was ready, with the end
// of its log, and says whether a port was taken between choosing and
// binding it (then the caller retries with new ports).
type earlyExit struct {
	err       error
	portTaken bool
}

func (e *earlyExit) Error() string { return e.err.Error() }

func (p *process) earlyExit() *earlyExit {
	tail := LogTail(p.logPath, 15)
	return &earlyExit{
		err:       fmt.Errorf("testenv: %s exited during start-up (%v); log %s ends with:\n%s", p.name, p.proc.Err(), p.logPath, tail),
		portTaken: bytes.Contains(tail, []byte("address already in use")),
	}
}

// LogTail returns the last lines of the log at path (a child process's),
// or a note that there is none: what a start-up failure quotes.
func LogTail(path string, lines int) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return []byte("(no log: " + err.Error() + ")")
	}
	data = bytes.TrimRight(data, "\n")
	for i, n := len(data)-1, 0; i >= 0; i-- {
		if data[i] == '\n' {
			if n++; n == lines {
				return data[i+1:]
			}
		}
	}
	return data
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// Another process may take one before the child binds it; the caller
// retries then.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testenv: finding a free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func loopbackURL(scheme string, port int) string {
	return scheme + "://127.0.0.1:" + strconv.Itoa(port)
}
