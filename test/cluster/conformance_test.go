//go:build cluster && linux

package cluster

import (
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConformance runs Kubernetes' own LoadBalancer e2e tests
// (test/e2e/network/loadbalancer.go, "[sig-network] LoadBalancers") from
// e2e.test against a cloud cluster, from the client netns: where the
// Elastic IPs are reached through the routers, as from the Internet. make
// conformance runs it (METAL_CCM_CONFORMANCE_E2E is the e2e.test binary,
// METAL_CCM_CONFORMANCE_REPORT where the JUnit report goes).
func TestConformance(t *testing.T) {
	e2e, report := os.Getenv("METAL_CCM_CONFORMANCE_E2E"), os.Getenv("METAL_CCM_CONFORMANCE_REPORT")
	if e2e == "" || report == "" {
		t.Fatal("METAL_CCM_CONFORMANCE_E2E and METAL_CCM_CONFORMANCE_REPORT unset: run make conformance")
	}
	kubectl, err := findKubectl()
	if err != nil {
		t.Fatalf("kubectl: %v (make conformance builds it)", err)
	}
	coredns := os.Getenv("METAL_CCM_CLUSTER_COREDNS")
	if coredns == "" {
		t.Fatal("METAL_CCM_CLUSTER_COREDNS unset: run make conformance")
	}
	// Cluster DNS: the specs that change a Service's type check it by
	// name from a pod (CheckServiceReachability).
	// METAL_CCM_CONFORMANCE_SPEAKER (make conformance
	// CONFORMANCE_SPEAKER=...) picks the speaker; MetalLB 0.15.3 native
	// by default.
	speaker := os.Getenv("METAL_CCM_CONFORMANCE_SPEAKER")
	if speaker == "" {
		speaker = speakerNames[0]
	}
	c := startFor(t, Options{Cloud: speakerOptions(t, speaker), CoreDNS: coredns, Timeout: 7 * time.Minute})
	t.Logf("speaker %s", speaker)
	if err := os.MkdirAll(report, 0o755); err != nil {
		t.Fatal(err)
	}
	focus := os.Getenv("METAL_CCM_CONFORMANCE_FOCUS")
	if focus == "" {
		focus = `\[sig-network\] LoadBalancers`
	}
	// The client netns reaches kube-apiserver at the host's address, as
	// the kubelets do (node-kubeconfig: that address, the admin token).
	args := []string{"--net=/run/netns/" + c.ClientNS, "--", e2e,
		"--kubeconfig=" + filepath.Join(c.Dir, "node-kubeconfig"),
		"--provider=skeleton",
		"--ginkgo.focus=" + focus,
		"--ginkgo.v",
		"--ginkgo.timeout=2h",
		"--report-dir=" + report,
		"--kubectl-path=" + kubectl,
		// The control-plane node is tainted; the e2e framework should not
		// wait for it to take pods.
		"--non-blocking-taints=node-role.kubernetes.io/control-plane",
	}
	if skip := os.Getenv("METAL_CCM_CONFORMANCE_SKIP"); skip != "" {
		args = append(args, "--ginkgo.skip="+skip)
	}
	cmd := exec.Command("nsenter", args...)
	logPath := filepath.Join(report, "e2e.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"))
	began := time.Now()
	runErr := cmd.Run()
	t.Logf("e2e.test ran for %s (log %s)", time.Since(began).Round(time.Second), logPath)
	summary, ran, err := junitSummary(filepath.Join(report, "junit_01.xml"))
	if err != nil {
		t.Errorf("JUnit report: %v", err)
	} else {
		t.Logf("speaker %s: %s", speaker, summary)
		if ran == 0 {
			t.Errorf("no spec matched the focus %q: nothing was tested", focus)
		}
	}
	if runErr != nil {
		t.Fatalf("e2e.test: %v", runErr)
	}
}

type junitSuites struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Skipped  int `xml:"skipped,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Time    float64   `xml:"time,attr"`
			Skipped *struct{} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// junitSummary is one line per spec that ran or failed (not the thousands
// the focus skipped), then the totals.
func junitSummary(path string) (string, int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	var s junitSuites
	if err := xml.Unmarshal(data, &s); err != nil {
		return "", 0, err
	}
	var b strings.Builder
	ran, passed, failed := 0, 0, 0
	for _, suite := range s.Suites {
		for _, tc := range suite.Cases {
			// Ginkgo reports its suite hooks as test cases too.
			if tc.Skipped != nil || !strings.HasPrefix(tc.Name, "[It]") {
				continue
			}
			ran++
			status := "passed"
			if tc.Failure != nil {
				failed++
				status = "FAILED: " + firstLineOf(tc.Failure.Message+"\n"+tc.Failure.Text)
			} else {
				passed++
			}
			fmt.Fprintf(&b, "  %s (%s): %s\n", tc.Name, time.Duration(tc.Time*float64(time.Second)).Round(time.Second), status)
		}
	}
	fmt.Fprintf(&b, "specs run %d, passed %d, failed %d", ran, passed, failed)
	return b.String(), ran, nil
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
