package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// secretVolume writes cloud-sa.json the way the kubelet maintains a Secret
// volume: the content in a timestamped directory, "..data" a symlink to it,
// and the file a symlink through "..data"; an update swaps "..data".
type secretVolume struct {
	dir string
	gen int
}

func (v *secretVolume) write(t *testing.T, content []byte) {
	t.Helper()
	ts := filepath.Join(v.dir, fmt.Sprintf("..2026_11_24_%d", v.gen))
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "cloud-sa.json"), content, 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if v.gen == 0 {
		if err := os.Symlink("..data/cloud-sa.json", filepath.Join(v.dir, "cloud-sa.json")); err != nil {
			t.Fatal(err)
		}
	}
	v.gen++
}

// TestKeyRotation: the API key in the mounted cloud-config is rotated while
// the CCM runs; after the old key is revoked, new Services still get their
// Elastic IPs, with no restart. A key the API rejects is reported once and
// a rotation to a valid key recovers at once.
func TestKeyRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and the CCM binary; run without -short")
	}
	bin := os.Getenv("METAL_CCM_TEST_BINARY")
	if bin == "" {
		bin = buildCCM(t)
	}
	const keyA, keyB, keyC = "FakeRotationKeyA0123456789abcdef", "FakeRotationKeyB0123456789abcdef", "FakeRotationKeyC0123456789abcdef"
	ctx := context.Background()
	seed := emulator.DefaultSeed()
	seed.Tokens = []emulator.TokenSeed{{Token: keyA}}
	seed.Devices = append(seed.Devices, emulator.DeviceSeed{Hostname: "node-0", Metro: "da"})
	emu := emulator.StartForTest(t, seed, emulator.Options{})
	env := testenv.New(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	vol := &secretVolume{dir: filepath.Join(dir, "cloud-sa")}
	if err := os.Mkdir(vol.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cloudConfig := func(key string) []byte {
		b, _ := json.Marshal(map[string]any{"apiKey": key, "projectID": emulator.DefaultProjectID, "base-url": emu.URL(),
			"loadbalancer": "metallb:///metallb-system", "metro": "da", "moduleCacheDir": filepath.Join(dir, "modules")})
		return b
	}
	vol.write(t, cloudConfig(keyA))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	readyAddr := ln.Addr().String()
	_ = ln.Close()
	out := &syncBuffer{}
	cmd := exec.Command(bin, "--kubeconfig="+env.KubeconfigPath, "--cloud-config="+filepath.Join(vol.dir, "cloud-sa.json"),
		"--leader-elect=false", "--secure-port=0", "--authentication-skip-lookup", "--v=2", "--metal-readiness-address="+readyAddr)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Logf("the CCM ended with %v after SIGTERM", err)
		}
	})
	running := func() {
		t.Helper()
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the CCM exited (%v); it must keep running through a rotation:\n%s", err, tail(out.String(), 30))
		default:
		}
	}
	eventually := func(what string, cond func() (bool, string)) {
		t.Helper()
		var last string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			ok, msg := cond()
			last = msg
			return ok, nil
		}); err != nil {
			t.Fatalf("%s: never happened; last seen: %s\nCCM output ends:\n%s", what, last, tail(out.String(), 30))
		}
	}
	serviceGetsIP := func(name string) {
		t.Helper()
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}}}}
		if _, err := kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(name+" gets an Elastic IP", func() (bool, string) {
			s, err := kube.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
				return false, fmt.Sprintf("no address (%v)", err)
			}
			return true, ""
		})
	}
	// get asks the readiness listener for path (/readyz, /livez or a check's
	// own path, in Kubernetes' healthz format).
	get := func(path string, wantCode int, wantLines ...string) func() (bool, string) {
		return func() (bool, string) {
			resp, err := http.Get("http://" + readyAddr + path)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != wantCode {
				return false, fmt.Sprintf("%d %s", resp.StatusCode, b)
			}
			for _, l := range wantLines {
				if !strings.Contains(string(b), l) {
					return false, fmt.Sprintf("%d %s", resp.StatusCode, b)
				}
			}
			return true, ""
		}
	}
	logged := func(text string) func() (bool, string) {
		return func() (bool, string) { return strings.Contains(out.String(), text), "no log line " + text }
	}

	serviceGetsIP("before")
	eventually("ready", get("/readyz?verbose", 200, "[+]equinix-api ok\n", "[+]module ok\n", "[+]policies ok\n", "[+]caches ok\n", "readyz check passed\n"))
	pid := cmd.Process.Pid

	// Rotate: the new key exists, the file changes, the old key is revoked.
	if err := emu.Apply(&emulator.Seed{Tokens: []emulator.TokenSeed{{Token: keyB}}}); err != nil {
		t.Fatal(err)
	}
	vol.write(t, cloudConfig(keyB))
	eventually("the CCM takes the new key", logged("API key rotated"))
	emu.RevokeToken(keyA)
	serviceGetsIP("after-rotation")
	running()

	// The key is revoked under the CCM: reported once, calls held back.
	emu.RevokeToken(keyB)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rejected"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80}}}}
	if _, err := kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the CCM reports the rejected key", logged("rejects the API key (401 Unauthorized)"))
	eventually("not ready while the key is rejected", get("/readyz?verbose", 503, "[-]equinix-api failed: reason withheld\n", "readyz check failed\n"))
	eventually("the check's own path says why", get("/readyz/equinix-api", 503, "the Equinix Metal API has rejected the API key (401)"))
	eventually("alive while the key is rejected", get("/livez?verbose", 200, "[+]ping ok\n", "livez check passed\n"))
	time.Sleep(5 * time.Second) // the service controller retries meanwhile
	if n := strings.Count(out.String(), "rejects the API key (401 Unauthorized)"); n != 1 {
		t.Errorf("the rejected key was reported %d times, want once", n)
	}
	// A valid key in the file recovers without waiting for a probe.
	if err := emu.Apply(&emulator.Seed{Tokens: []emulator.TokenSeed{{Token: keyC}}}); err != nil {
		t.Fatal(err)
	}
	vol.write(t, cloudConfig(keyC))
	eventually("rejected gets an Elastic IP after the rotation", func() (bool, string) {
		s, err := kube.CoreV1().Services("default").Get(ctx, "rejected", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, fmt.Sprintf("no address (%v)", err)
		}
		return true, ""
	})
	eventually("ready again with the new key", get("/readyz?verbose", 200, "[+]equinix-api ok\n", "readyz check passed\n"))
	running()
	if cmd.Process.Pid != pid {
		t.Fatal("the CCM process changed")
	}
	for _, k := range []string{keyA, keyB, keyC} {
		if strings.Contains(out.String(), k) {
			t.Errorf("a key is in the CCM's output")
		}
	}
}
