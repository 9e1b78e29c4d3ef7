//go:build cluster && linux

package cluster

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Cluster DNS: the specs that change a Service's type check it by
	// name from a pod (CheckServiceReachability).
	coredns := os.Getenv("METAL_CCM_CLUSTER_COREDNS")
	if coredns == "" {
		t.Fatal("METAL_CCM_CLUSTER_COREDNS unset: run make conformance")
	}
	// Ginkgo's CLI runs the specs in METAL_CCM_CONFORMANCE_PROCS parallel
	// e2e.test processes, as Kubernetes' own CI runs this suite (none of
	// its specs is [Serial]); each spec has its own namespace.
	ginkgo := os.Getenv("METAL_CCM_CONFORMANCE_GINKGO")
	if ginkgo == "" {
		t.Fatal("METAL_CCM_CONFORMANCE_GINKGO unset: run make conformance")
	}
	procs := os.Getenv("METAL_CCM_CONFORMANCE_PROCS")
	if n, err := strconv.Atoi(procs); err != nil || n < 1 {
		t.Fatalf("METAL_CCM_CONFORMANCE_PROCS=%q: want a whole number of processes, 1 or more (make conformance CONFORMANCE_PROCS=3)", procs)
	}
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
	args := []string{"--net=/run/netns/" + c.ClientNS, "--", ginkgo,
		"--procs=" + procs,
		"--focus=" + focus,
		"-v",
		"--no-color",
		"--timeout=2h",
	}
	if skip := os.Getenv("METAL_CCM_CONFORMANCE_SKIP"); skip != "" {
		args = append(args, "--skip="+skip)
	}
	// Only the first process counts the nodes that take pods; the others
	// keep --num-nodes' default (-1) and skip every spec that needs two
	// nodes ("Requires at least 2 nodes (not -1)"), so they are told.
	workers := schedulableNodes(t, c)
	t.Logf("%s parallel e2e.test processes, %d nodes that take pods", procs, workers)
	// The client netns reaches kube-apiserver at the host's address, as
	// the kubelets do (node-kubeconfig: that address, the admin token).
	args = append(args, e2e, "--",
		"--kubeconfig="+filepath.Join(c.Dir, "node-kubeconfig"),
		"--provider=skeleton",
		"--report-dir="+report,
		"--kubectl-path="+kubectl,
		"--num-nodes="+strconv.Itoa(workers),
		// The control-plane node is tainted; the e2e framework should not
		// wait for it to take pods.
		"--non-blocking-taints=node-role.kubernetes.io/control-plane",
	)
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

// schedulableNodes counts the cluster's Nodes without a NoSchedule taint:
// the nodes e2e's framework counts as schedulable.
func schedulableNodes(t *testing.T, c *Cluster) int {
	t.Helper()
	nodes, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, node := range nodes.Items {
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoSchedule }) {
			n++
		}
	}
	return n
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
