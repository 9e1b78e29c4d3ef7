//go:build e2e && linux

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
)

// TestSandboxDataPlane runs the sandbox (`make run`) as make run does, with
// MetalLB and GoBGP, and checks that its live view shows the data plane:
// every node's session up at both routers (the CCM's policies give all
// eight nodes BGP), and each sample Service's /32 at the routers with one
// next hop per node of its Elastic IP's metro and none from the other
// metro, the same at both. (Its failover is TestSandbox's, in
// test/cmd/sandbox.) The sandbox makes a namespace of its own inside this test's,
// as it does on a host, so it runs alongside TestWrongPeerASNFailsAtRouters,
// which mostly waits.
func TestSandboxDataPlane(t *testing.T) {
	t.Parallel()
	sandbox := os.Getenv(dataplane.EnvSandbox)
	if _, err := os.Stat(sandbox); err != nil {
		t.Fatalf("%s=%q: %v; run make e2e, which builds it", dataplane.EnvSandbox, sandbox, err)
	}
	ccm := os.Getenv(dataplane.EnvCCM)
	dir := t.TempDir()
	// The sandbox runs until this test has seen a view with the whole data
	// plane (and the plan has run), then gets SIGTERM, as Ctrl-C from a
	// user; --duration only bounds a run that never gets there. A fixed
	// duration made the result depend on how fast a loaded machine brings
	// eight speakers' sessions up.
	cmd := exec.Command(sandbox, "--ccm", ccm, "--metallb", os.Getenv(dataplane.EnvMetalLB), "--gobgp", os.Getenv(dataplane.EnvGoBGP),
		"--plain", "--duration", "150s", "--failover-after", "0", "--refresh", "2s", "--dir", filepath.Join(dir, "work"))
	// Not marked as inside a namespace: the sandbox must make its own.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "METAL_CCM_IN_NETNS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// The plan line it prints must work from this shell, outside the
	// sandbox's namespace: kube-apiserver and the emulator are forwarded.
	var out bytes.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// planResult is set before planDone closes.
	var planResult string
	planDone := make(chan struct{})
	converged, scanned := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(scanned)
		planLine := regexp.MustCompile(`from this shell: (\S+) plan --kubeconfig (\S+) --cloud-config (\S+)`)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		ran, seen := false, false
		view := ""
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if m := planLine.FindStringSubmatch(line); m != nil && !ran {
				ran = true
				go func() { planResult = runPlan(m[1], m[2], m[3]); close(planDone) }()
			}
			// A view is whole when the next one starts.
			if strings.Contains(line, viewHeader) {
				if !seen && len(missingFromView(view)) == 0 {
					seen = true
					close(converged)
				}
				view = ""
			}
			view += line + "\n"
		}
		if !ran {
			planResult = "the sandbox printed no plan line"
			close(planDone)
		}
	}()
	go func() {
		// Stop once both are in; if the view never converges, --duration ends it.
		<-converged
		<-planDone
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}()
	err := cmd.Wait()
	_ = pw.Close()
	<-scanned
	<-planDone
	text := out.String()
	if err != nil {
		t.Fatalf("sandbox: %v\n%s", err, text)
	}
	if !strings.HasPrefix(planResult, "Cluster ") {
		t.Errorf("plan from outside the sandbox's namespace: %s", planResult)
	} else {
		t.Logf("plan from outside the sandbox's namespace:\n%s", planResult)
	}
	if strings.Contains(text+planResult, "emulator-token") {
		t.Error("the API key was printed")
	}
	if !strings.Contains(text, "==> data plane on:") {
		t.Fatalf("the sandbox did not run the data plane:\n%s", text)
	}
	if m := regexp.MustCompile(`everything started in (\S+)`).FindStringSubmatch(text); m != nil {
		t.Logf("sandbox with the data plane: everything started in %s", m[1])
	}
	select {
	case <-converged:
		t.Logf("the view showed the whole data plane after %s", firstConverged(text))
	default:
		last := text[strings.LastIndex(text, viewHeader):]
		for _, want := range missingFromView(last) {
			t.Errorf("no view showed the whole data plane before --duration ran out; the last lacks %s:\n%s", want, last)
		}
	}
}

// viewHeader starts each of the sandbox's views.
const viewHeader = "Equinix Metal CCM sandbox"

// missingFromView returns what a view lacks of the whole data plane. An
// Elastic IP is routed only in its metro: each /32 from the nodes there
// (sandbox.Devices: five in da, three in sv), none from the other. The
// view pads the next-hop column to its widest entry.
func missingFromView(view string) []*regexp.Regexp {
	var missing []*regexp.Regexp
	for _, want := range viewWants {
		if !want.MatchString(view) {
			missing = append(missing, want)
		}
	}
	return missing
}

var viewWants = func() []*regexp.Regexp {
	da := regexp.QuoteMeta("5: cp-0 cp-1 worker-0 worker-1 worker-2") + " +the same"
	sv := regexp.QuoteMeta("3: cp-2 worker-3 worker-4") + " +the same"
	return []*regexp.Regexp{
		regexp.MustCompile(`BGP sessions up: router-1 \(169\.254\.255\.1\) 8/8, router-2 \(169\.254\.255\.2\) 8/8`),
		regexp.MustCompile(`\S+/32 +default/web +` + da),             // reserved in da
		regexp.MustCompile(`\S+/32 +default/api +` + sv),             // reserved in sv
		regexp.MustCompile(`198\.18\.63\.10/32 +default/byo +` + da), // sandbox.BYOAddress, reserved in da
	}
}()

// firstConverged returns the "since start" of the first view that showed
// the whole data plane, for the log.
func firstConverged(text string) string {
	since := regexp.MustCompile(viewHeader + ` — (\S+) since start`)
	views := strings.Split(text, viewHeader)
	for _, v := range views[1:] {
		v = viewHeader + v
		if len(missingFromView(v)) == 0 {
			if m := since.FindStringSubmatch(v); m != nil {
				return m[1]
			}
		}
	}
	return "?"
}

// runPlan runs the plan command the sandbox printed and returns its
// output when it succeeded (exit 0, or 2: something would change), or
// what went wrong.
func runPlan(ccm, kubeconfig, cloudConfig string) string {
	var stdout, stderr bytes.Buffer
	c := exec.Command(ccm, "plan", "--kubeconfig", kubeconfig, "--cloud-config", cloudConfig)
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var exit *exec.ExitError
	if err == nil || errors.As(err, &exit) && exit.ExitCode() == 2 {
		return stdout.String()
	}
	return fmt.Sprintf("%v; stderr: %s", err, stderr.String())
}
