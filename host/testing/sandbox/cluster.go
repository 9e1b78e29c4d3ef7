package sandbox

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/testing/emulator"
)

// Device is one machine of the sandbox project.
type Device struct {
	Name, Metro  string
	ControlPlane bool
	PrivateIP    string
}

// Devices is the sandbox project: three control-plane nodes on loopback
// addresses (two metros) and five workers.
var Devices = []Device{
	{Name: "cp-0", Metro: "da", ControlPlane: true, PrivateIP: "127.0.0.11"},
	{Name: "cp-1", Metro: "da", ControlPlane: true, PrivateIP: "127.0.1.12"},
	{Name: "cp-2", Metro: "sv", ControlPlane: true, PrivateIP: "127.1.0.13"},
	{Name: "worker-0", Metro: "da"}, {Name: "worker-1", Metro: "da"}, {Name: "worker-2", Metro: "da"},
	{Name: "worker-3", Metro: "sv"}, {Name: "worker-4", Metro: "sv"},
}

// Seed is the emulator's default project with devs, its private networks
// on loopback: the BGP source addresses and the control-plane health checks
// stay on this machine.
func Seed(devs []Device) *emulator.Seed {
	seed := emulator.DefaultSeed()
	for i := range seed.Metros {
		switch seed.Metros[i].Code {
		case "da":
			seed.Metros[i].PrivateIPv4 = "127.0.0.0/16"
		case "sv":
			seed.Metros[i].PrivateIPv4 = "127.1.0.0/16"
		}
	}
	for _, d := range devs {
		s := emulator.DeviceSeed{Hostname: d.Name, Metro: d.Metro}
		if d.ControlPlane {
			// Loopback addresses, so the health checks reach the sandbox's
			// /healthz servers and nothing else.
			s.PrivateIPv4, s.NoPublicIPv4, s.NoPublicIPv6 = d.PrivateIP, true, true
		}
		seed.Devices = append(seed.Devices, s)
	}
	return seed
}

// RegisterNodes creates a Node per device, as kubelets with
// --cloud-provider=external register them: tainted uninitialized, the
// control-plane ones labelled as such.
func RegisterNodes(ctx context.Context, kube kubernetes.Interface, devs []Device) error {
	for _, d := range devs {
		labels := map[string]string{}
		if d.ControlPlane {
			labels["node-role.kubernetes.io/control-plane"] = ""
		}
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Labels: labels},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// PrepareModuleTargets creates the namespace a custom module writes into
// (its namespace option) and, in legacy MetalLB mode, the ConfigMap with an
// entry of the user's own, so the view shows the CCM merging into it.
func PrepareModuleTargets(ctx context.Context, kube kubernetes.Interface, loadBalancer string) error {
	lb, err := config.ParseLoadBalancer(loadBalancer)
	if err != nil {
		return fmt.Errorf("--loadbalancer: %q %v", loadBalancer, err)
	}
	if ns := lb.Options["namespace"]; lb.Kind == config.LBWasm && ns != "" {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if lb.Kind == config.LBMetalLBConfigMap {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lb.Namespace}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: lb.Namespace, Name: lb.ConfigMap},
			Data: map[string]string{"config": "address-pools:\n- name: users-own-pool\n  protocol: bgp\n  addresses:\n  - 192.0.2.0/28\n"}}
		if _, err := kube.CoreV1().ConfigMaps(lb.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// SampleServices are one Service per behaviour worth seeing.
func SampleServices() []*v1.Service {
	mk := func(name string, ann map[string]string, ip string) *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: ann},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerIP: ip, Selector: map[string]string{"app": name},
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		}
	}
	return []*v1.Service{
		mk("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, ""),
		mk("api", map[string]string{"metal.equinix.com/eip-metro": "sv"}, ""),
		mk("byo", nil, "145.40.90.10"),
		mk("nowhere", nil, ""),
	}
}

// ccmProcess is the running CCM binary.
type ccmProcess struct {
	cmd    *exec.Cmd
	log    string
	exited chan error    // its exit, once
	done   chan struct{} // closed when it has exited
}

// startCCM runs the CCM binary against the emulator and the cluster, with
// the API key in the cloud-config file only.
func startCCM(o Options, dir, metalURL, kubeconfig string) (*ccmProcess, error) {
	cloudConfig := map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": metalURL,
		"loadbalancer": o.LoadBalancer, "eipTag": cpTag, "eipHealthCheckUseHostIP": true,
		"moduleCacheDir": filepath.Join(dir, "module-cache"),
	}
	if o.PolicyDir != "" {
		cloudConfig["policyDir"] = o.PolicyDir
	}
	b, _ := json.MarshalIndent(cloudConfig, "", "  ")
	cc := filepath.Join(dir, "cloud-sa.json")
	if err := os.WriteFile(cc, b, 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "ccm.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.CCM,
		"--kubeconfig="+kubeconfig, "--cloud-config="+cc,
		"--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
		"--secure-port=0", "--authentication-skip-lookup", "--v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "METAL_API_KEY=") // the key comes from the file only
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &ccmProcess{cmd: cmd, log: logPath, exited: make(chan error, 1), done: make(chan struct{})}
	go func() {
		p.exited <- cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop asks the CCM to shut down and gives it a few seconds to.
func (p *ccmProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// HealthServers answer /healthz like control-plane nodes' kube-apiservers.
type HealthServers struct {
	mu      sync.Mutex
	servers map[string]*httptest.Server // by node name
}

// StartHealthServers serves /healthz (TLS) on every control-plane device's
// private address and port.
func StartHealthServers(devs []Device, port int) (*HealthServers, error) {
	h := &HealthServers{servers: map[string]*httptest.Server{}}
	for _, d := range devs {
		if !d.ControlPlane {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", d.PrivateIP, port))
		if err != nil {
			h.StopAll()
			return nil, fmt.Errorf("listening on %s:%d for %s's /healthz (loopback addresses other than 127.0.0.1 are needed): %w", d.PrivateIP, port, d.Name, err)
		}
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" {
				_, _ = w.Write([]byte("ok"))
				return
			}
			http.NotFound(w, r)
		}))
		s.Listener = ln
		s.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		s.StartTLS()
		h.servers[d.Name] = s
	}
	return h, nil
}

// Stop takes one node's /healthz down, as if its kube-apiserver died.
func (h *HealthServers) Stop(node string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.servers[node]
	if !ok {
		return fmt.Errorf("no control-plane node %q holds the EIP", node)
	}
	s.Close()
	delete(h.servers, node)
	return nil
}

// StopAll takes every /healthz down.
func (h *HealthServers) StopAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.servers {
		s.Close()
	}
}
