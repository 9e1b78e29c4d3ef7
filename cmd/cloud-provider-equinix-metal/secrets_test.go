package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// The secrets of TestNoSecretInLogs: distinctive, so that any encoding of
// them in the output is found, and clearly fake.
const (
	testAPIKey  = "FakeKeyTrust0123456789abcdefWXYZ"
	testBGPPass = "FakeBgpPass2026"
)

var bgpPeers = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}

// TestNoSecretInLogs runs the CCM binary at --v=10 (client-go dumps every
// request and response body) against the emulator and a real kube-apiserver,
// with an API key and a BGP password set, through BGP (project, sessions,
// node annotations, MetalLB peers) and a Service with an Elastic IP, and
// then searches everything it printed for both secrets in every encoding.
//
// METAL_CCM_TEST_BINARY runs another build of the CCM instead (that is how
// this test was shown to fail on the code before the redaction).
func TestNoSecretInLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and the CCM binary; run without -short")
	}
	bin := os.Getenv("METAL_CCM_TEST_BINARY")
	if bin == "" {
		bin = buildCCM(t)
	}
	// Both log formats: they are different loggers behind klog.
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) { noSecretInLogs(t, bin, format) })
	}
}

func noSecretInLogs(t *testing.T, bin, format string) {
	ctx := context.Background()
	seed := emulator.DefaultSeed()
	seed.Tokens = []emulator.TokenSeed{{Token: testAPIKey}}
	for _, n := range []string{"node-0", "node-1"} {
		seed.Devices = append(seed.Devices, emulator.DeviceSeed{Hostname: n, Metro: "da"})
	}
	emu := emulator.StartForTest(t, seed, emulator.Options{})
	env := testenv.New(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, n := range []string{"node-0", "node-1"} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{v1.LabelHostname: n}},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	cc, _ := json.Marshal(map[string]any{
		"apiKey": testAPIKey, "projectID": emulator.DefaultProjectID, "base-url": emu.URL(),
		"loadbalancer": "metallb:///metallb-system", "bgpPass": testBGPPass, "metro": "da",
		"moduleCacheDir": filepath.Join(dir, "modules"),
	})
	ccPath := filepath.Join(dir, "cloud-sa.json")
	if err := os.WriteFile(ccPath, cc, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "--kubeconfig="+env.KubeconfigPath, "--cloud-config="+ccPath,
		"--leader-elect=false", "--secure-port=0", "--authentication-skip-lookup", "--v=10", "--logging-format="+format)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}}}
	if _, err := kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Everything that carries the password has happened: the project's BGP
	// was enabled with it, the nodes carry it (base64) in their annotations,
	// and MetalLB's peers for both nodes exist.
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			last = fmt.Sprintf("Service web has no address yet (%v)", err)
			return false, nil
		}
		for _, n := range []string{"node-0", "node-1"} {
			node, err := kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil || node.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] == "" {
				last = fmt.Sprintf("node %s has no BGP annotations yet (%v)", n, err)
				return false, nil
			}
		}
		peers, err := dyn.Resource(bgpPeers).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
		if err != nil || len(peers.Items) < 2 {
			last = fmt.Sprintf("BGPPeers: %v", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		stop()
		t.Fatalf("the CCM never got there: %s; its output ends:\n%s", last, tail(out.String(), 40))
	}
	// The Secret the peers reference is applied in the same sync; it is
	// checked after the log search, so that a build without it (the code
	// before this test) still shows what its logs hold.
	secretErr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Secrets("metallb-system").Get(ctx, "equinix-metal-bgp-password", metav1.GetOptions{})
		return err == nil, nil
	})
	stop()

	// No BGPPeer carries the password; each references the Secret that does.
	peers, err := dyn.Resource(bgpPeers).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers.Items {
		pw, _, _ := unstructured.NestedString(p.Object, "spec", "password")
		ref, _, _ := unstructured.NestedString(p.Object, "spec", "passwordSecret", "name")
		if pw != "" || ref != "equinix-metal-bgp-password" {
			t.Errorf("BGPPeer %s: spec.password set: %v, passwordSecret %q; want no password and the Secret equinix-metal-bgp-password", p.GetName(), pw != "", ref)
		}
	}
	sec, err := kube.CoreV1().Secrets("metallb-system").Get(ctx, "equinix-metal-bgp-password", metav1.GetOptions{})
	if err != nil {
		t.Errorf("the BGP password Secret: %v (waited: %v)", err, secretErr)
	} else if sec.Type != v1.SecretTypeBasicAuth || string(sec.Data["password"]) != testBGPPass {
		t.Errorf("the BGP password Secret has type %q and does not hold the project's password", sec.Type)
	}

	logs := out.String()
	if !strings.Contains(logs, "Request Body") || !strings.Contains(logs, "Response Body") {
		t.Fatalf("the output has no client-go body dumps; is --v=10 in effect?\n%s", tail(logs, 20))
	}
	// The password did travel through logged bodies (the node annotations,
	// MetalLB's objects): it must show as redacted there, not be absent
	// because nothing was logged.
	if !strings.Contains(logs, "[redacted]") {
		t.Error("no [redacted] in the output: the bodies that carry the password were not logged, so this run proves nothing")
	}
	for _, f := range findSecrets(logs, map[string]string{"API key": testAPIKey, "BGP password": testBGPPass}) {
		t.Error(f)
	}
	t.Logf("searched %d lines (%d bytes) of --v=10 output", strings.Count(logs, "\n"), len(logs))
}

// findSecrets lists every line of logs that shows a secret: in clear, in
// base64 (standard or URL alphabet, padded or not, at any byte offset inside
// a longer base64 text), in base64 of its base64 (the node annotation's
// form, encoded again), in hex, and inside a hex dump of a binary body.
func findSecrets(logs string, secrets map[string]string) []string {
	type needle struct{ what, text string }
	var needles []needle
	for name, s := range secrets {
		b64 := base64.StdEncoding.EncodeToString([]byte(s))
		needles = append(needles, needle{name + " in clear", s}, needle{name + " in hex", hex.EncodeToString([]byte(s))})
		for _, form := range []struct{ what, value string }{{"", s}, {"base64 of the base64 of ", b64}} {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				for k := 0; k < 3; k++ {
					full := enc.EncodeToString(append(make([]byte, k), form.value...))
					core := full[(8*k+5)/6 : 8*(k+len(form.value))/6]
					needles = append(needles, needle{fmt.Sprintf("%sbase64 of the %s (offset %d)", form.what, name, k), core})
				}
			}
		}
	}
	var found []string
	lines := strings.Split(logs, "\n")
	for i, line := range lines {
		for _, n := range needles {
			if strings.Contains(line, n.text) {
				found = append(found, fmt.Sprintf("line %d shows the %s: %.300s", i+1, n.what, line))
			}
		}
	}
	// Hex dumps: client-go logs a protobuf body with hex.Dump; decode each
	// run of rows and search the bytes. A JSON log line holds the rows
	// joined by an escaped line break.
	lines = strings.Split(strings.ReplaceAll(logs, `\n`, "\n"), "\n")
	var data []byte
	start := 0
	flush := func(end int) {
		for name, s := range secrets {
			for _, v := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
				if bytes.Contains(data, []byte(v)) {
					found = append(found, fmt.Sprintf("the hex dump on lines %d-%d holds the %s", start+1, end, name))
				}
			}
		}
		data = data[:0]
	}
	for i, line := range lines {
		m := hexDumpRow.FindStringSubmatch(line)
		if m == nil {
			if len(data) > 0 {
				flush(i)
			}
			continue
		}
		if len(data) == 0 {
			start = i
		}
		for _, h := range strings.Fields(m[1]) {
			b, _ := hex.DecodeString(h)
			data = append(data, b...)
		}
	}
	flush(len(lines))
	return found
}

var hexDumpRow = regexp.MustCompile(`^\s*[0-9a-f]{8}  ((?:[0-9a-f]{2} {1,2}){1,16})`)

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
