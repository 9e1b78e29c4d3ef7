package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/memlimit"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/proc"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// ccmProcess is the CCM binary running against the bench's cluster.
type ccmProcess struct {
	proc    *proc.Proc
	logPath string
	port    int
}

// startCCM runs the binary with the flags a deployment uses, its own user
// and a metrics endpoint on loopback.
// goMemoryLimit is the soft limit host/memlimit gives the CCM's runtime in
// a container with this memory limit, the CCM running a module with the
// default memory limit, as the bench's does.
func goMemoryLimit(container int64) int64 {
	soft, _, _ := memlimit.Soft(container, wasmhost.DefaultMemoryLimitMiB<<20)
	return soft
}

func startCCM(bin, loadbalancer, dir string, env *testenv.Env, metalURL string, memoryLimit int64, cg *memCgroup) (*ccmProcess, error) {
	kubeconfig, err := writeUserKubeconfig(env, ccmUser, filepath.Join(dir, "ccm-kubeconfig"))
	if err != nil {
		return nil, err
	}
	cloudConfig := map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": metalURL,
		"loadbalancer": loadbalancer, "metro": "da",
		// Every node announces every Service address: a fleet of this size
		// has its session limit raised (else one warning per node).
		"bgpMaxPrefixes": 100000,
		"moduleCacheDir": filepath.Join(dir, "module-cache"),
	}
	b, _ := json.MarshalIndent(cloudConfig, "", "  ")
	cc := filepath.Join(dir, "cloud-sa.json")
	if err := os.WriteFile(cc, b, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &ccmProcess{logPath: filepath.Join(dir, "ccm.log"), port: port}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig, "--cloud-config="+cc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--authentication-skip-lookup", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*",
		"--v=1")
	// KUBECONFIG too: upstream v3.8.1's MetalLB CRD client (controller-
	// runtime's) reads only the environment, and exits without a word.
	cmd.Env = append(os.Environ(), "METAL_API_KEY=", "KUBECONFIG="+kubeconfig)
	if memoryLimit > 0 {
		// What host/memlimit sets from the container's cgroup limit in a
		// pod; here there is no cgroup, so the environment says it.
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMEMLIMIT=%d", goMemoryLimit(memoryLimit)))
	}
	if p.proc, err = proc.Start(cmd, logFile); err != nil {
		return nil, err
	}
	if cg != nil {
		if err := cg.add(p.proc.Pid()); err != nil {
			p.proc.Stop(0)
			return nil, fmt.Errorf("moving the CCM into its memory cgroup: %w", err)
		}
	}
	return p, nil
}

// stop asks the CCM to end and kills it after 20 s; how a CCM asked to stop
// ended says nothing, so it is not reported.
func (p *ccmProcess) stop() { p.proc.Stop(20 * time.Second) }

// peakRSS is VmHWM, the process's peak resident set, in KiB.
func (p *ccmProcess) peakRSS() (int64, error) { return p.status("VmHWM:") }

// rss is VmRSS, the resident set now, in KiB.
func (p *ccmProcess) rss() (int64, error) { return p.status("VmRSS:") }

func (p *ccmProcess) status(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.proc.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.proc.Pid())
}

// ccmMetrics is what the bench reads from the CCM's /metrics.
type ccmMetrics struct {
	generateCount float64
	generateSum   float64
	// buckets of generate_duration_seconds: upper bound → cumulative count
	buckets map[float64]float64
	// syncs by result (success, deadline, memory, ...)
	syncs map[string]float64
	// writes counts the CCM's create, patch and delete requests to the
	// apiserver (client-go's rest_client_requests_total).
	writes float64
}

func (p *ccmProcess) metrics() (*ccmMetrics, error) {
	body, err := p.get("/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading the CCM's metrics: %w", err)
	}
	return parseMetrics(body), nil
}

// saveHeapProfile writes the CCM's heap profile (its --profiling endpoint,
// on by default in k8s.io/cloud-provider) to path, for go tool pprof;
// gc=1 collects first, so it shows what is live now, not at the last GC.
func (p *ccmProcess) saveHeapProfile(path string) error {
	body, err := p.get("/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("reading the CCM's heap profile: %w", err)
	}
	return os.WriteFile(path, body, 0o644)
}

// get reads a path of the CCM's secure port.
func (p *ccmProcess) get(path string) ([]byte, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		// The CCM's self-signed serving certificate, on loopback.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", p.port, path))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	return body, nil
}

const (
	generateMetric = "equinix_metal_lbmodule_generate_duration_seconds"
	syncsMetric    = "equinix_metal_lbmodule_syncs_total"
	requestsMetric = "rest_client_requests_total"
)

func parseMetrics(body []byte) *ccmMetrics {
	m := &ccmMetrics{buckets: map[float64]float64{}, syncs: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, requestsMetric+"{") && (strings.Contains(line, `method="POST"`) ||
			strings.Contains(line, `method="PATCH"`) || strings.Contains(line, `method="DELETE"`)) {
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
					m.writes += v
				}
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, syncsMetric+`{result="`); ok {
			result, value, _ := strings.Cut(rest, `"} `)
			if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
				m.syncs[result] = v
			}
			continue
		}
		if !strings.HasPrefix(line, generateMetric) {
			continue
		}
		name, value, _ := strings.Cut(line, " ")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch {
		case name == generateMetric+"_sum":
			m.generateSum = v
		case name == generateMetric+"_count":
			m.generateCount = v
		case strings.HasPrefix(name, generateMetric+"_bucket"):
			_, le, _ := strings.Cut(name, `le="`)
			le, _, _ = strings.Cut(le, `"`)
			if bound, err := strconv.ParseFloat(le, 64); err == nil {
				m.buckets[bound] = v
			}
		}
	}
	return m
}

// sub is m minus an earlier reading (nil: from zero).
func (m *ccmMetrics) sub(earlier *ccmMetrics) *ccmMetrics {
	if earlier == nil {
		return m
	}
	out := &ccmMetrics{generateCount: m.generateCount - earlier.generateCount,
		generateSum: m.generateSum - earlier.generateSum, buckets: map[float64]float64{}, syncs: map[string]float64{}}
	for k, v := range m.buckets {
		out.buckets[k] = v - earlier.buckets[k]
	}
	for k, v := range m.syncs {
		if d := v - earlier.syncs[k]; d > 0 {
			out.syncs[k] = d
		}
	}
	return out
}

// maxBound is the smallest bucket bound that holds every call: the
// slowest call took at most this long.
func (m *ccmMetrics) maxBound() float64 {
	best := -1.0
	for bound, n := range m.buckets {
		if n >= m.generateCount && (best < 0 || bound < best) {
			best = bound
		}
	}
	return best
}

func writeUserKubeconfig(env *testenv.Env, user, path string) (string, error) {
	rc, err := env.UserConfig(user)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: user}
	cfg.CurrentContext = "bench"
	return path, clientcmd.WriteToFile(*cfg, path)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// watcher counts, from informers, the nodes the CCM has initialised with
// their BGP peers and the Services with an ingress address; and, to the
// event, when each node first lost the uninitialized taint (the start-up
// figure: until then nothing is scheduled on it).
type watcher struct {
	mu        sync.Mutex
	nodes     map[string]bool
	svcs      map[string]bool
	untainted map[string]time.Time
}

func startWatcher(ctx context.Context, kube kubernetes.Interface) (*watcher, error) {
	w := &watcher{nodes: map[string]bool{}, svcs: map[string]bool{}, untainted: map[string]time.Time{}}
	f := informers.NewSharedInformerFactory(kube, 0)
	_, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.node(o) },
		UpdateFunc: func(_, o any) { w.node(o) },
	})
	if err != nil {
		return nil, err
	}
	_, err = f.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.service(o) },
		UpdateFunc: func(_, o any) { w.service(o) },
	})
	if err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w, nil
}

func (w *watcher) node(o any) {
	n, ok := o.(*v1.Node)
	if !ok {
		return
	}
	done := n.Spec.ProviderID != "" && n.Annotations["metal.equinix.com/bgp-peers-1-peer-ip"] != ""
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider })
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nodes[n.Name] = done
	if _, seen := w.untainted[n.Name]; !seen && !tainted {
		w.untainted[n.Name] = time.Now()
	}
}

// allUntainted is when the last of n nodes lost the uninitialized taint;
// false until all have.
func (w *watcher) allUntainted(n int) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, at := range w.untainted {
		if at.After(last) {
			last = at
		}
	}
	return last, len(w.untainted) >= n
}

func (w *watcher) service(o any) {
	s, ok := o.(*v1.Service)
	if !ok || s.Spec.Type != v1.ServiceTypeLoadBalancer {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.svcs[s.Namespace+"/"+s.Name] = len(s.Status.LoadBalancer.Ingress) > 0
}

// counts are the nodes initialised and the Services with an ingress.
func (w *watcher) counts() (nodes, svcs int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ok := range w.nodes {
		if ok {
			nodes++
		}
	}
	for _, ok := range w.svcs {
		if ok {
			svcs++
		}
	}
	return nodes, svcs
}
