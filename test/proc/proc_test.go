package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func start(t *testing.T, script string) (*Proc, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "child.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(exec.Command("sh", "-c", script), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0) })
	return p, logPath
}

// The child's output, both streams, is in the log once it has ended, and
// Err is how it ended.
func TestStartLogsAndWaits(t *testing.T) {
	p, logPath := start(t, "echo out; echo err >&2; exit 3")
	<-p.Done()
	if !p.Exited() {
		t.Fatal("Exited is false after Done")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Err = %v, want exit status 3", err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "out\nerr\n" {
		t.Fatalf("log = %q", got)
	}
}

// Stop asks first: a child that ends on SIGTERM ends before the grace.
func TestStopAsksFirst(t *testing.T) {
	p, _ := start(t, "exec sleep 60")
	begin := time.Now()
	p.Stop(time.Minute)
	if !p.Exited() || time.Since(begin) > 30*time.Second {
		t.Fatalf("Stop took %v", time.Since(begin))
	}
}

// A child that ignores SIGTERM is killed after the grace; a grace of 0
// kills at once.
func TestStopKillsAfterGrace(t *testing.T) {
	for _, grace := range []time.Duration{200 * time.Millisecond, 0} {
		p, logPath := start(t, `trap "" TERM; echo ready; while :; do sleep 0.05; done`)
		// The trap must be set before the SIGTERM, or the shell just ends.
		deadline := time.Now().Add(30 * time.Second)
		for b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "ready"); b, _ = os.ReadFile(logPath) {
			if time.Now().After(deadline) {
				t.Fatalf("the child never said ready: %q", b)
			}
			time.Sleep(10 * time.Millisecond)
		}
		p.Stop(grace)
		if !p.Exited() {
			t.Fatalf("grace %v: not ended after Stop", grace)
		}
	}
}

// A nil Proc (never started) is neither running nor stoppable.
func TestNilProc(t *testing.T) {
	var p *Proc
	if p.Exited() {
		t.Fatal("a nil Proc has exited")
	}
	p.Stop(time.Second)
}

// A command that does not start is an error, and its log is closed.
func TestStartFails(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(exec.Command(filepath.Join(t.TempDir(), "missing")), log); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
	if err := log.Close(); err == nil {
		t.Fatal("the log is still open")
	}
}
