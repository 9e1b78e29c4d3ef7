package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

type options struct {
	ccm string
	// loadbalancer is the cloud-config's loadbalancer URL.
	loadbalancer string
	services     int
	nodes        int
	latency      time.Duration
	timeout      time.Duration
	dir          string
	skipModule   bool
	// moduleWait bounds the wait for the module's objects once the
	// Services have their addresses: a module that keeps failing is
	// reported, not waited for.
	moduleWait time.Duration
	// quiet is how long to count the background with nothing changing.
	quiet time.Duration
	// memoryLimit is the container memory limit the CCM runs as if under
	// (bytes; 0 for none): the Go runtime gets the soft limit that
	// host/memlimit would derive from it.
	memoryLimit int64
	// cgroup: hold the CCM to memoryLimit in a real memory cgroup too.
	cgroup bool
}

// ccmUser is who the CCM acts as, so that the audit log tells its writes
// apart from the bench's own.
const ccmUser = "scalebench-ccm"

var (
	gvrPools = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}
	gvrPeers = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}
)

// bench is one run: the emulator, the cluster and the CCM process.
type bench struct {
	o       options
	logf    func(string, ...any)
	emu     *emulator.Emulator
	env     *testenv.Env
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	ccm     *ccmProcess
	watch   *watcher
	samples *sampler
	cgroup  *memCgroup // nil without -cgroup or a limit
}

// sampler watches the CCM every second in the background, whatever the
// bench is doing: a phase that pauses or parses the audit log must not
// leave a hole in the lease watch (one did: a 10 s "gap between renewals"
// that was the bench's own pause).
type sampler struct {
	mu sync.Mutex
	// hwm is the CCM's VmHWM at the last sample, in KiB: still known
	// once the CCM exits.
	hwm int64
	// anonPeak is the largest RssAnon sampled, in KiB: the memory only
	// the process holds. The rest of the RSS is mostly the binary's own
	// pages, which the kernel can drop and read again.
	anonPeak int64
	lease    leaseWatch
	stop     context.CancelFunc
	done     chan struct{}
}

// startSampling samples the CCM every second until stopSampling.
func (b *bench) startSampling(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{stop: cancel, done: make(chan struct{})}
	b.samples = s
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			hwm, herr := b.ccm.peakRSS()
			anon, aerr := b.ccm.status("RssAnon:")
			s.mu.Lock()
			if herr == nil {
				s.hwm = hwm
			}
			if aerr == nil {
				s.anonPeak = max(s.anonPeak, anon)
			}
			s.lease.observe(ctx, b.kube)
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stopSampling ends the sampling and records what it saw in rep.
func (b *bench) stopSampling(rep *report) {
	s := b.samples
	if s == nil {
		return
	}
	s.stop()
	<-s.done
	rep.peakRSSKiB, rep.peakAnonKiB, rep.lease = s.hwm, s.anonPeak, s.lease
	if b.cgroup != nil {
		rep.cgroupPeak, _ = b.cgroup.peak()
		rep.oomKills, _ = b.cgroup.oomKills()
	}
}

// sampled is what the sampler has seen so far.
func (b *bench) sampled() (hwm, anonPeak int64) {
	b.samples.mu.Lock()
	defer b.samples.mu.Unlock()
	return b.samples.hwm, b.samples.anonPeak
}

// defaultLoadBalancer is the loadbalancer the bench gives the CCM unless
// told otherwise: MetalLB's custom resources in metallb-system.
const defaultLoadBalancer = "metallb:///metallb-system"

func run(ctx context.Context, o options, logf func(string, ...any)) (*report, error) {
	if o.loadbalancer == "" {
		o.loadbalancer = defaultLoadBalancer
	}
	if o.services < 1 || o.nodes < 1 {
		return nil, fmt.Errorf("-services %d and -nodes %d: both must be at least 1", o.services, o.nodes)
	}
	if _, err := os.Stat(o.ccm); err != nil {
		return nil, fmt.Errorf("no CCM binary at %s: run make build", o.ccm)
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "ccm-scalebench-")
		if err != nil {
			return nil, err
		}
		o.dir = d
	}
	b := &bench{o: o, logf: logf}
	rep := &report{o: o}
	defer b.close()
	defer b.stopSampling(rep)
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	if err := b.fill(ctx, rep); err != nil {
		return rep, err
	}
	if err := b.quietWindow(ctx, rep); err != nil {
		return rep, err
	}
	if err := b.oneMoreService(ctx, rep); err != nil {
		return rep, err
	}
	if err := b.oneMoreNode(ctx, rep); err != nil {
		return rep, err
	}
	b.stopSampling(rep)
	b.ccm.stop()
	if !o.skipModule {
		logf("measuring the module in process at %d Services x %d nodes", o.services, o.nodes)
		mr, err := measureModule(ctx, o.services, o.nodes)
		if err != nil {
			return rep, err
		}
		rep.module = mr
	}
	return rep, nil
}

func (b *bench) close() {
	if b.ccm != nil {
		b.ccm.stop()
	}
	if b.cgroup != nil {
		b.cgroup.remove()
	}
	if b.env != nil {
		b.env.Stop()
	}
	if b.emu != nil {
		b.emu.Close()
	}
}

// start brings up the emulator (devices, latency), the cluster (nodes,
// Services, no CCM yet) and leaves the CCM to fill.
func (b *bench) start(ctx context.Context) error {
	o := b.o
	emu, err := emulator.New(emulator.DefaultSeed(), emulator.Options{})
	if err != nil {
		return err
	}
	b.emu = emu
	if _, err := emu.AddDevices(o.nodes, emulator.DeviceSeed{Hostname: "node-%04d", Metro: "da"}); err != nil {
		return err
	}
	if _, err := emu.Listen("127.0.0.1:0"); err != nil {
		return err
	}
	emu.SetFault(emulator.AllRoutes, emulator.Fault{Latency: emulator.Duration(o.latency)})
	b.logf("emulator: %d devices in metro da, %s latency on every call", o.nodes, o.latency)

	env, err := testenv.Start(ctx, testenv.Options{
		Dir: filepath.Join(o.dir, "cluster"), KeepDir: true, AuditLog: true,
		Users: []testenv.User{{Name: ccmUser, Groups: []string{"system:masters"}}},
		// Room for the ClusterIPs of every Service.
		APIServerFlags: []string{"--service-cluster-ip-range=10.96.0.0/16"},
		Timeout:        5 * time.Minute,
	})
	if err != nil {
		return err
	}
	b.env = env
	cfg := *env.Config
	cfg.QPS, cfg.Burst = 1000, 2000
	b.kube = kubernetes.NewForConfigOrDie(&cfg)
	b.dyn = dynamic.NewForConfigOrDie(&cfg)
	b.logf("kube-apiserver ready in %s (work dir %s)", env.StartDuration.Round(time.Millisecond), o.dir)

	began := time.Now()
	if err := parallel(ctx, o.nodes, func(i int) error { return b.createNode(ctx, i) }); err != nil {
		return err
	}
	for i := range 10 {
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i)}}
		if _, err := b.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := parallel(ctx, o.services, func(i int) error { return b.createService(ctx, i) }); err != nil {
		return err
	}
	b.logf("created %d nodes and %d LoadBalancer Services in %s", o.nodes, o.services, time.Since(began).Round(time.Millisecond))
	b.watch, err = startWatcher(ctx, b.kube)
	return err
}

func (b *bench) createNode(ctx context.Context, i int) error {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i)},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
	if _, err := b.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Ready, as its kubelet reports: the node lifecycle controller asks the
	// cloud about NotReady nodes only. A patch of the condition alone, as a
	// kubelet's: the CCM may have initialised the node (its addresses in
	// the status) since the create, which an update would conflict with.
	now := metav1.Now()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{{
		Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}}})
	if err != nil {
		return err
	}
	_, err = b.kube.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func (b *bench) createService(ctx context.Context, i int) error {
	no := false
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bench-%d", i%10), Name: fmt.Sprintf("svc-%05d", i)},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "x"},
			// MetalLB in BGP mode needs no node ports; and 10,000 Services
			// would exhaust the default node-port range.
			AllocateLoadBalancerNodePorts: &no,
			Ports:                         []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	_, err := b.kube.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
	return err
}

// fill starts the CCM and waits until every node is initialised with its
// BGP peers, every Service has its ingress, and the module's objects are
// all applied.
func (b *bench) fill(ctx context.Context, rep *report) error {
	o := b.o
	b.emu.ResetCounts()
	before, err := b.auditMark()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if o.memoryLimit > 0 && o.cgroup {
		if b.cgroup, err = newMemCgroup(o.memoryLimit); err != nil {
			return fmt.Errorf("a memory cgroup for the CCM: %w (root and the memory controller are needed; -cgroup=false sets only GOMEMLIMIT)", err)
		}
		rep.cgroup = true
	}
	b.ccm, err = startCCM(b.o.ccm, o.loadbalancer, o.dir, b.env, b.emu.URL(), o.memoryLimit, b.cgroup)
	if err != nil {
		return err
	}
	b.logf("CCM started (pid %d); its log: %s", b.ccm.proc.Pid(), b.ccm.logPath)
	b.startSampling(ctx)
	var nodesAt, svcsAt time.Duration
	lastLog := time.Now()
	progress := func(nodes, svcs int) {
		if time.Since(lastLog) < 30*time.Second {
			return
		}
		lastLog = time.Now()
		pools, peers, _ := b.moduleObjects(ctx)
		b.logf("after %s: %d/%d nodes, %d/%d Services with ingress, %d pools, %d BGP peers, %d Equinix calls",
			time.Since(t0).Round(time.Second), nodes, o.nodes, svcs, o.services, pools, peers, b.emu.TotalRequests())
	}
	err = b.poll(ctx, func() (bool, error) {
		nodes, svcs := b.watch.counts()
		if nodesAt == 0 && nodes >= o.nodes {
			nodesAt = time.Since(t0)
			b.logf("all %d nodes initialised with their BGP peers after %s", o.nodes, nodesAt.Round(time.Millisecond))
		}
		if svcsAt == 0 && svcs >= o.services {
			svcsAt = time.Since(t0)
			b.logf("all %d Services have their ingress after %s", o.services, svcsAt.Round(time.Millisecond))
		}
		progress(nodes, svcs)
		return nodesAt > 0 && svcsAt > 0, nil
	})
	if err != nil {
		return err
	}
	rep.nodesReady, rep.servicesReady = nodesAt, svcsAt
	if at, ok := b.watch.allUntainted(o.nodes); ok {
		rep.nodesUntainted = at.Sub(t0)
	}
	rep.moduleApplied, err = b.waitModule(ctx, o.services, o.nodes)
	if err != nil {
		return err
	}
	rep.fillWall = time.Since(t0)
	if rep.moduleApplied {
		b.logf("the module's objects are applied after %s", rep.fillWall.Round(time.Millisecond))
	} else {
		b.logf("the module's objects are NOT all applied %s after the last ingress; going on", o.moduleWait)
	}
	rep.fill, err = b.phaseResult("fill", rep.fillWall, before, nil)
	if err != nil {
		return err
	}
	rep.rssAfterFillKiB, _ = b.ccm.rss()
	rep.peakRSSKiB, rep.peakAnonKiB = b.sampled()
	if path := filepath.Join(o.dir, "heap-after-fill.pprof"); b.ccm.saveHeapProfile(path) == nil {
		b.logf("the CCM's heap profile after the fill: go tool pprof %s", path)
	}
	// Let the loops that follow the last change (module sync, status
	// writes, the service controller's queue) finish before measuring the
	// next step, so that it counts only its own work.
	t1 := time.Now()
	if err := b.settle(ctx); err != nil {
		return err
	}
	rep.settled = time.Since(t1)
	b.logf("the CCM's writes stopped %s after the fill", rep.settled.Round(time.Second))
	return nil
}

// settle waits, at most moduleWait, until the CCM has made no create,
// patch or delete request to the apiserver for 10 seconds (client-go's
// request counter in its /metrics; lease renewals are updates, not
// counted).
func (b *bench) settle(ctx context.Context) error {
	const quiet = 10 * time.Second
	wctx, cancel := context.WithTimeout(ctx, b.o.moduleWait)
	defer cancel()
	last, since := -1.0, time.Now()
	err := b.poll(wctx, func() (bool, error) {
		m, err := b.ccm.metrics()
		if err != nil {
			return false, err
		}
		if m.writes != last {
			last, since = m.writes, time.Now()
		}
		return time.Since(since) >= quiet, nil
	})
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		b.logf("the CCM still writes %s after the fill; going on", b.o.moduleWait)
		return nil
	}
	return err
}

// quietWindow counts what the CCM does while nothing changes: the
// background (neighbour and cache re-reads, lease renewals) that the
// one-more-Service and one-node windows also contain.
func (b *bench) quietWindow(ctx context.Context, rep *report) error {
	window := b.o.quiet
	if window <= 0 {
		return nil
	}
	m0, before, err := b.phaseStart()
	if err != nil {
		return err
	}
	// Polled, not slept: the poll notices the CCM exiting.
	t0 := time.Now()
	if err := b.poll(ctx, func() (bool, error) { return time.Since(t0) >= window, nil }); err != nil {
		return err
	}
	rep.quiet, err = b.phaseResult("nothing changing", window, before, m0)
	return err
}

func (b *bench) oneMoreService(ctx context.Context, rep *report) error {
	m0, before, err := b.phaseStart()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.createService(ctx, b.o.services); err != nil {
		return err
	}
	if err := b.poll(ctx, func() (bool, error) {
		_, svcs := b.watch.counts()
		return svcs > b.o.services, nil
	}); err != nil {
		return err
	}
	if rep.moduleApplied {
		if _, err := b.waitModule(ctx, b.o.services+1, b.o.nodes); err != nil {
			return err
		}
	}
	wall := time.Since(t0)
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	rep.oneService, err = b.phaseResult("one more Service", wall, before, m0)
	return err
}

func (b *bench) oneMoreNode(ctx context.Context, rep *report) error {
	m0, before, err := b.phaseStart()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := b.emu.AddDevice(emulator.DeviceSeed{Hostname: fmt.Sprintf("node-%04d", b.o.nodes), Metro: "da"}); err != nil {
		return err
	}
	if err := b.createNode(ctx, b.o.nodes); err != nil {
		return err
	}
	if err := b.poll(ctx, func() (bool, error) {
		nodes, _ := b.watch.counts()
		return nodes > b.o.nodes, nil
	}); err != nil {
		return err
	}
	if rep.moduleApplied {
		if _, err := b.waitModule(ctx, b.o.services+1, b.o.nodes+1); err != nil {
			return err
		}
	}
	wall := time.Since(t0)
	if err := sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	rep.oneNode, err = b.phaseResult("one node joining", wall, before, m0)
	return err
}

// waitModule waits, at most moduleWait, until the module's objects cover
// services Services and nodes nodes; false if they never did.
func (b *bench) waitModule(ctx context.Context, services, nodes int) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, b.o.moduleWait)
	defer cancel()
	err := b.poll(wctx, func() (bool, error) {
		pools, peers, err := b.moduleObjects(ctx)
		return pools >= services && peers >= 2*nodes, err
	})
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return false, nil
	}
	return err == nil, err
}

// phaseStart resets the Equinix counters and notes the CCM's metrics and
// the audit log's length.
func (b *bench) phaseStart() (*ccmMetrics, int, error) {
	b.emu.ResetCounts()
	m0, err := b.ccm.metrics()
	if err != nil {
		return nil, 0, err
	}
	before, err := b.auditMark()
	return m0, before, err
}

func (b *bench) phaseResult(name string, wall time.Duration, auditFrom int, m0 *ccmMetrics) (phase, error) {
	p := phase{name: name, wall: wall, calls: b.emu.Counts()}
	m, err := b.ccm.metrics()
	if err != nil {
		return p, err
	}
	p.generate = m.sub(m0)
	calls, err := b.ccmCalls()
	if err != nil {
		return p, err
	}
	p.writes = writesOf(calls[auditFrom:])
	return p, nil
}

func (b *bench) auditMark() (int, error) {
	calls, err := b.ccmCalls()
	return len(calls), err
}

func (b *bench) ccmCalls() ([]testenv.APICall, error) {
	events, err := b.env.AuditEvents()
	if err != nil {
		return nil, err
	}
	return testenv.CallsBy(testenv.Calls(events), ccmUser), nil
}

// moduleObjects counts the IPAddressPools and BGPPeers the module made,
// without listing them (limit 1 and the remaining count).
func (b *bench) moduleObjects(ctx context.Context) (pools, peers int, err error) {
	count := func(gvr schema.GroupVersionResource) (int, error) {
		l, err := b.dyn.Resource(gvr).Namespace(testenv.MetalLBNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		n := len(l.Items)
		if r := l.GetRemainingItemCount(); r != nil {
			n += int(*r)
		}
		return n, nil
	}
	if pools, err = count(gvrPools); err != nil {
		return 0, 0, err
	}
	peers, err = count(gvrPeers)
	return pools, peers, err
}

// poll calls done every second (every 100 ms up to 1,000 Services, where
// a second would be most of what is measured) until it says so, fails,
// the CCM exits, or ctx ends.
func (b *bench) poll(ctx context.Context, done func() (bool, error)) error {
	every := time.Second
	if b.o.services <= 1000 {
		every = 100 * time.Millisecond
	}
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting (%w); the CCM's log: %s", ctx.Err(), b.ccm.logPath)
		case <-b.ccm.proc.Done():
			err := b.ccm.proc.Err()
			if b.cgroup != nil {
				if n, _ := b.cgroup.oomKills(); n > 0 {
					return fmt.Errorf("the CCM exited at %s (%v): the kernel killed it over the %d MiB memory cgroup limit; its log: %s", time.Now().Format("15:04:05"), err, b.o.memoryLimit>>20, b.ccm.logPath)
				}
			}
			return fmt.Errorf("the CCM exited at %s (%v); its log: %s", time.Now().Format("15:04:05"), err, b.ccm.logPath)
		case <-time.After(every):
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// parallel runs f(0..n-1) on 32 workers and returns the first error.
func parallel(ctx context.Context, n int, f func(int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	jobs := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
