//go:build cluster && linux

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// TestTwoNodes starts two real nodes, runs a pod on each, and checks that a
// pod on node-1 reaches the pod on node-2 by its IP (through both nodes'
// netns and the router), with nc.
func TestTwoNodes(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 2, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if t.Failed() {
			c.removeDir = false
			t.Logf("cluster: test failed; logs kept in %s", c.Dir)
		}
		if !stopped {
			c.Stop()
		}
	})

	ns := metav1.NamespaceDefault
	ips := map[string]string{}
	for _, n := range c.Nodes {
		pod := serverPod("server-"+n.Name, n.Name)
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		p := waitPod(t, c, ns, "server-"+n.Name, corev1.PodRunning, 2*time.Minute)
		ips[n.Name] = p.Status.PodIP
		t.Logf("pod %s Running on %s with IP %s (node IP %s)", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.HostIP)
		if !strings.HasPrefix(p.Status.PodIP, strings.TrimSuffix(n.PodCIDR, "0/24")) {
			t.Errorf("pod %s has IP %s, not in its node's range %s", p.Name, p.Status.PodIP, n.PodCIDR)
		}
	}

	// A client pod on node-1 talks to the server pod on node-2.
	target := ips["node-2"]
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			NodeName:      "node-1",
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "nc", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", "nc -w 5 " + target + " 8080"},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "client", corev1.PodSucceeded, time.Minute)
	logs, err := c.Client.CoreV1().Pods(ns).GetLogs("client", &corev1.PodLogOptions{}).Do(ctx).Raw()
	if err != nil {
		t.Fatalf("client logs (kube-apiserver -> kubelet): %v", err)
	}
	if want := "hello from server-node-2"; !strings.Contains(string(logs), want) {
		t.Fatalf("client on node-1 got %q from %s, want %q", logs, target, want)
	}
	t.Logf("client pod on node-1 read %q from %s:8080 (pod on node-2)", strings.TrimSpace(string(logs)), target)

	// The same through kubectl exec (kube-apiserver -> kubelet -> containerd
	// streaming): make cluster-test builds kubectl beside kube-apiserver; a
	// plain go test uses the one on PATH, if any.
	if kubectl, err := findKubectl(); err != nil {
		t.Logf("no kubectl (%v): kubectl exec not checked", err)
	} else {
		out, err := exec.Command(kubectl, "--kubeconfig", c.KubeconfigPath(), "exec", "-n", ns, "server-node-1", "--",
			"nc", "-w", "5", target, "8080").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "hello from server-node-2") {
			t.Errorf("kubectl exec server-node-1 -- nc %s 8080: %v: %s", target, err, out)
		} else {
			t.Logf("%s exec server-node-1 -- nc %s 8080: %s", kubectl, target, bytes.TrimSpace(out))
		}
	}

	// Nothing left behind once stopped.
	c.Stop()
	stopped = true
	checkNothingLeft(t, c)
}

// TestStopAfterCrash: the kubelet and containerd die (kill -9) with a pod
// running and the API gone, so no sandbox is torn down the normal way; Stop
// must still leave nothing behind (the shim and the container, CNI's cache,
// the shim's socket, mounts, cgroups).
func TestStopAfterCrash(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			c.Stop()
		}
	})
	if _, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, serverPod("p", "node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, metav1.NamespaceDefault, "p", corev1.PodRunning, 2*time.Minute)
	c.Nodes[0].kubelet.stop(0)
	c.Nodes[0].containerd.stop(0)
	c.Env.Stop()
	c.Client = nil
	c.Stop()
	stopped = true
	checkNothingLeft(t, c)
}

// startFor starts a cluster for the test and stops it when the test ends,
// keeping its work directory (and saving its pods' logs) if the test
// failed, then checks that nothing was left behind.
func startFor(t *testing.T, o Options) *Cluster {
	t.Helper()
	o.Logf = t.Logf
	c, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.removeDir = false
			t.Logf("cluster: test failed; logs kept in %s", c.Dir)
		}
		c.Stop()
		checkNothingLeft(t, c)
	})
	return c
}

func checkNothingLeft(t *testing.T, c *Cluster) {
	t.Helper()
	dir, id := c.Dir, c.id
	for _, check := range []struct{ what, cmd string }{
		{"network namespaces", "ip netns list | grep " + id + " || true"},
		{"mounts", "grep -F " + dir + " /proc/self/mountinfo || true"},
		{"cgroups", "ls -d /sys/fs/cgroup/*/" + id + " 2>/dev/null || true"},
		{"host veth", "ip -br link | grep " + id + " || true"},
	} {
		out, _ := exec.Command("sh", "-c", check.cmd).CombinedOutput()
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("left behind (%s):\n%s", check.what, s)
		}
	}
	for _, d := range sharedDirs {
		if _, err := os.Stat(d); err == nil && !c.existed[d] {
			t.Errorf("left behind: %s (did not exist before Start)", d)
		}
	}
	if procs := processesMentioning(dir); len(procs) > 0 {
		t.Errorf("left behind (processes):\n%s", strings.Join(procs, "\n"))
	}
	for _, d := range []string{shimSocketDir, "/var/lib/cni/results"} {
		for name := range listDir(d) {
			if (d == shimSocketDir && !c.shimsWere[name]) || strings.Contains(name, id) || (strings.HasPrefix(name, "cni-loopback-") && !c.resultsWere[name]) {
				t.Errorf("left behind: %s/%s", d, name)
			}
		}
	}
	if _, err := os.Stat(dir); err == nil && c.removeDir {
		t.Errorf("work directory %s left behind", dir)
	}
}

func serverPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "server", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever,
				// busybox's wget crashes on this machine; nc is enough.
				Command: []string{"/bin/sh", "-c", "while true; do echo hello from " + name + " | nc -l -p 8080; done"},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

func waitPod(t *testing.T, c *Cluster, ns, name string, phase corev1.PodPhase, timeout time.Duration) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var pod *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return p.Status.Phase == phase, nil
	})
	if err != nil {
		var status string
		if pod != nil {
			status = fmt.Sprintf("phase %s, %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
		}
		events, _ := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		var ev []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name {
				ev = append(ev, e.Reason+": "+e.Message)
			}
		}
		t.Fatalf("pod %s not %s after %s (%s); events: %s", name, phase, timeout, status, strings.Join(ev, " | "))
	}
	return pod
}

// TestClusterIPService runs kube-proxy (iptables) on two nodes, with
// kube-controller-manager for the EndpointSlices and kube-scheduler to place
// the server, and checks that a pod on the other node reaches the server
// through a ClusterIP Service.
func TestClusterIPService(t *testing.T) {
	ctx := context.Background()
	c := startFor(t, Options{Nodes: 2, KubeProxy: true, Scheduler: true})
	ns := metav1.NamespaceDefault
	server := serverPod("echo", "")
	server.Labels = map[string]string{"app": "echo"}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	svc, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "echo", corev1.PodRunning, 2*time.Minute)
	t.Logf("server pod scheduled on %s, IP %s; Service ClusterIP %s", p.Spec.NodeName, p.Status.PodIP, svc.Spec.ClusterIP)
	other := "node-1"
	if p.Spec.NodeName == "node-1" {
		other = "node-2"
	}
	// kube-proxy needs the EndpointSlice (kube-controller-manager) and a
	// sync; the client retries for a while instead of racing them.
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-client"},
		Spec: corev1.PodSpec{
			NodeName:      other,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "nc", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", "for i in $(seq 30); do out=$(nc -w 2 " + svc.Spec.ClusterIP + " 80) && [ -n \"$out\" ] && echo \"$out\" && exit 0; sleep 1; done; exit 1"},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "svc-client", corev1.PodSucceeded, 2*time.Minute)
	logs, err := c.Client.CoreV1().Pods(ns).GetLogs("svc-client", &corev1.PodLogOptions{}).Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "hello from echo") {
		t.Fatalf("client on %s got %q from %s:80", other, logs, svc.Spec.ClusterIP)
	}
	t.Logf("client pod on %s read %q from Service %s:80", other, strings.TrimSpace(string(logs)), svc.Spec.ClusterIP)
}

// processesMentioning lists the processes whose command line contains s.
func processesMentioning(s string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			found = append(found, e.Name()+" "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return found
}

func findKubectl() (string, error) {
	if dir, err := testenv.DefaultAssetsDir(); err == nil {
		if p := filepath.Join(dir, "kubectl"); exec.Command(p, "version", "--client").Run() == nil {
			return p, nil
		}
	}
	return exec.LookPath("kubectl")
}
