//go:build cluster && linux

package cluster

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// The stages of a Service's way from creation to its first answered
// request, in order. The Kubernetes stages are seen as their watch events
// arrive, the routes as each router's kernel table changes (ip monitor),
// kube-proxy's rules by reading each node's nat table every 100 ms while
// a Service in a status lacks its rule there, the reservation
// by the emulator's own record, the answer by a request every 100 ms from
// the moment a router has the route.
var stageNames = []string{
	"picked up by the service controller",
	"Elastic IP reserved (Equinix)",
	"address in the Service's status (CCM)",
	"IPAddressPool written (CCM's module)",
	"allocated by MetalLB's controller",
	"in FRR's file (first node)",
	"applied by frr-reload.py (first node)",
	"route at router-1",
	"route at router-2",
	"kube-proxy's rule at every node",
	"first HTTP answer at the client",
}

const (
	stagePickedUp = iota
	stageReserved
	stageStatus
	stagePool
	stageAllocated
	stageFRRFile    // FRR's speakers only
	stageFRRApplied // FRR's speakers only
	stageRouter1    // and router-2 after it
	stageProxied    = stageRouter1 + 2
	stageAnswer     = stageRouter1 + 3
)

var ipAddressPools = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}

// serviceStages is one Service's way: when it was created, and when each
// stage was first seen (zero: never).
type serviceStages struct {
	name    string
	created time.Time
	ip      string
	at      []time.Time // by stageNames
	// watched is when the Service's watch first showed it: under load a
	// create is answered seconds after the object exists.
	watched time.Time
	// failedAsks are the answer probe's failed requests, the last with
	// lastAskErr.
	failedAsks int
	lastAskErr string
}

// stageWatch is what stageTable follows, under one lock: the Services by
// name, and which addresses are in a pool or routed before their Service
// has its address.
type stageWatch struct {
	mu       sync.Mutex
	byName   map[string]*serviceStages
	byIP     map[string]*serviceStages
	pooledAt map[string]time.Time // address → first seen in a pool
	routedAt []map[string]time.Time
	// proxiedAt: address → when each node's kube-proxy was first seen
	// with its rule (by node index).
	proxiedAt map[string][]time.Time
	answered  chan *serviceStages // a Service routed at a router: start asking
}

func (w *stageWatch) seen(s *serviceStages, stage int, at time.Time) {
	if s.at[stage].IsZero() {
		s.at[stage] = at
	}
}

// start is when the Service's clock starts: its create answered, or its
// first watch event if that came first (a create on a loaded kube-apiserver
// was answered up to 7.6 s after the object existed, and every stage
// before that read as 0).
func (s *serviceStages) start() time.Time {
	if !s.watched.IsZero() && (s.created.IsZero() || s.watched.Before(s.created)) {
		return s.watched
	}
	return s.created
}

// service records what one Service watch event shows.
func (w *stageWatch) service(obj any, at time.Time) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.byName[svc.Name]
	if s == nil {
		return
	}
	if s.watched.IsZero() {
		s.watched = at
	}
	if slices.Contains(svc.Finalizers, "service.kubernetes.io/load-balancer-cleanup") {
		w.seen(s, stagePickedUp, at)
	}
	for k := range svc.Annotations {
		if strings.HasSuffix(k, "/ip-allocated-from-pool") {
			w.seen(s, stageAllocated, at)
		}
	}
	if s.ip != "" || len(svc.Status.LoadBalancer.Ingress) == 0 {
		return
	}
	s.ip = svc.Status.LoadBalancer.Ingress[0].IP
	w.byIP[s.ip] = s
	w.seen(s, stageStatus, at)
	// The pool or the routes may have come first (the module reads the
	// CCM's own record of the address, not the status).
	if t, ok := w.pooledAt[s.ip]; ok {
		w.seen(s, stagePool, t)
	}
	for r := range w.routedAt {
		if t, ok := w.routedAt[r][s.ip]; ok {
			w.routed(s, r, t)
		}
	}
	w.proxiedEverywhere(s)
}

// awaitsRule reports whether a Service in a status has no rule seen at
// node i yet: only then is its nat table worth reading (iptables-save of
// kube-proxy's nf_tables rules, three nodes ten times a second, cost the
// cluster a good part of a core during the burst). A rule kube-proxy
// wrote before the status reached this watch is seen at its first read.
func (w *stageWatch) awaitsRule(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ip := range w.byIP {
		if seen := w.proxiedAt[ip]; seen == nil || seen[i].IsZero() {
			return true
		}
	}
	return false
}

// proxied records one read of node i's nat table: the addresses kube-proxy
// has a load-balancer rule for there.
func (w *stageWatch) proxied(i, nodes int, ips map[string]bool, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ip := range ips {
		seen := w.proxiedAt[ip]
		if seen == nil {
			seen = make([]time.Time, nodes)
			w.proxiedAt[ip] = seen
		}
		if seen[i].IsZero() {
			seen[i] = at
		}
		if s := w.byIP[ip]; s != nil {
			w.proxiedEverywhere(s)
		}
	}
}

// proxiedEverywhere records the kube-proxy stage once every node has s's
// rule: the latest of the nodes' first sightings.
func (w *stageWatch) proxiedEverywhere(s *serviceStages) {
	var last time.Time
	for _, at := range w.proxiedAt[s.ip] {
		if at.IsZero() {
			return
		}
		if at.After(last) {
			last = at
		}
	}
	if !last.IsZero() {
		w.seen(s, stageProxied, last)
	}
}

// pool records what one IPAddressPool watch event shows.
func (w *stageWatch) pool(obj any, at time.Time) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	addrs, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "addresses")
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range addrs {
		ip := strings.TrimSuffix(a, "/32")
		if i := strings.Index(ip, "-"); i > 0 {
			ip = ip[:i]
		}
		if _, ok := w.pooledAt[ip]; !ok {
			w.pooledAt[ip] = at
		}
		if s := w.byIP[ip]; s != nil {
			w.seen(s, stagePool, at)
		}
	}
}

// routes records one poll of router r's table.
func (w *stageWatch) routes(r int, routed map[string]bool, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ip := range routed {
		if _, ok := w.routedAt[r][ip]; !ok {
			w.routedAt[r][ip] = at
		}
		if s := w.byIP[ip]; s != nil {
			w.routed(s, r, w.routedAt[r][ip])
		}
	}
}

func (w *stageWatch) routed(s *serviceStages, r int, at time.Time) {
	first := s.at[stageRouter1].IsZero() && s.at[stageRouter1+1].IsZero()
	w.seen(s, stageRouter1+r, at)
	if first {
		w.answered <- s
	}
}

// stageTable creates n Cluster-policy Services for the web pods at once,
// follows each through the stages, prints per stage the p50, p99 and
// max of the time since creation, and deletes them. Figures printed,
// never asserted; a Service that never answers fails the test.
func stageTable(t *testing.T, c *Cluster, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &stageWatch{
		byName: map[string]*serviceStages{}, byIP: map[string]*serviceStages{}, pooledAt: map[string]time.Time{},
		proxiedAt: map[string][]time.Time{}, answered: make(chan *serviceStages, n),
	}
	for range c.Routers {
		w.routedAt = append(w.routedAt, map[string]time.Time{})
	}
	svcs := make([]*serviceStages, n)
	for i := range n {
		svcs[i] = &serviceStages{name: fmt.Sprintf("stage-%02d", i), at: make([]time.Time, len(stageNames))}
		w.byName[svcs[i].name] = svcs[i]
	}

	// The watches are running before the first Service is created.
	handler := func(record func(any, time.Time)) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { record(obj, time.Now()) },
			UpdateFunc: func(_, obj any) { record(obj, time.Now()) },
		}
	}
	kube := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(metav1.NamespaceDefault))
	if _, err := kube.Core().V1().Services().Informer().AddEventHandler(handler(w.service)); err != nil {
		t.Fatal(err)
	}
	kube.Start(ctx.Done())
	kube.WaitForCacheSync(ctx.Done())
	// The pool and MetalLB's allocation are stages of the speakers that
	// read IPAddressPools; kube-vip and MetalLB 0.12.1's ConfigMap have
	// neither (the CRD is not there to watch: its informer would never
	// sync), so those rows stay empty.
	if hasPools(c) {
		dyn, err := dynamic.NewForConfig(c.Env.Config)
		if err != nil {
			t.Fatal(err)
		}
		pools := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metallbNamespace, nil)
		if _, err := pools.ForResource(ipAddressPools).Informer().AddEventHandler(handler(w.pool)); err != nil {
			t.Fatal(err)
		}
		pools.Start(ctx.Done())
		pools.WaitForCacheSync(ctx.Done())
	}
	// The instruments share the machine's two cores with the cluster, so
	// they cost as little as they can: the routers' tables are followed
	// as they change (ip monitor), and a node's nat table is read only
	// while a Service in a status lacks its rule there.
	for r, router := range c.Routers {
		if err := watchRoutes(ctx, router, func(ip string, at time.Time) {
			w.routes(r, map[string]bool{ip: true}, at)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i, node := range c.Nodes {
		go func() {
			for ctx.Err() == nil {
				if w.awaitsRule(i) {
					w.proxied(i, len(c.Nodes), proxiedAt(node), time.Now())
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}

	// Each Service routed at a router is asked until it answers, from the
	// moment it is routed: the asking starts before the creates, some of
	// which take seconds to be answered on a loaded kube-apiserver (asked
	// only once every create was answered, the first answers were as late
	// as the slowest create).
	deadline := time.Now().Add(3 * time.Minute)
	var answers sync.WaitGroup
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		for range n {
			var s *serviceStages
			select {
			case s = <-w.answered:
			case <-time.After(time.Until(deadline)):
			}
			if s == nil {
				break
			}
			answers.Add(1)
			go func() {
				defer answers.Done()
				w.mu.Lock()
				url := "http://" + net.JoinHostPort(s.ip, "80") + "/hostname"
				w.mu.Unlock()
				probe := answerProbe(c)
				for time.Now().Before(deadline) {
					sent := time.Now()
					resp, err := probe.Get(url)
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							w.mu.Lock()
							w.seen(s, stageAnswer, sent)
							w.mu.Unlock()
							return
						}
						err = fmt.Errorf("HTTP %s", resp.Status)
					}
					w.mu.Lock()
					s.failedAsks++
					s.lastAskErr = err.Error()
					w.mu.Unlock()
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
	}()

	// A Service's time starts when kube-apiserver answered its create, or
	// when its watch first showed it if that came first (start).
	var wg sync.WaitGroup
	createTook := make([]time.Duration, n)
	for i, s := range svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			if _, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, LoadBalancerService(s.name, "web", corev1.ServiceExternalTrafficPolicyCluster), metav1.CreateOptions{}); err != nil {
				t.Errorf("%s: %v", s.name, err)
			}
			created := time.Now()
			createTook[i] = created.Sub(sent)
			w.mu.Lock()
			s.created = created
			w.mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(createTook)
	t.Logf("%d Services created at once: each create took %s to %s", n, createTook[0].Round(time.Millisecond), createTook[n-1].Round(time.Millisecond))
	defer deleteAndSettle(t, c, svcs)

	<-dispatched
	answers.Wait()
	// What the watches saw of the reservations: the emulator's own times.
	w.mu.Lock()
	defer w.mu.Unlock()
	reserved := map[string]time.Time{}
	for _, r := range c.Emu.Reservations(c.Emu.Projects()[0].ID) {
		reserved[r.Prefix.Addr().String()] = r.CreatedAt
	}
	for _, s := range svcs {
		if at, ok := reserved[s.ip]; ok {
			w.seen(s, stageReserved, at)
		}
		if s.ip != "" {
			frrStages(c, s)
		}
	}
	t.Logf("speaker %s: %s", c.cloud.Speaker(), formatStages(svcs))
	t.Log(formatSlowest(svcs, 3))
	t.Log(allocationFailures(ctx, c, svcs))
	t.Logf("the module's last syncs and failures, and stage-00's way (the CCM's log):\n%s", lastCCMLogLines(c, 60, "Load-balancer module", "lbmodule", "sync.go", "failures.go", "stage-00"))
	for _, s := range svcs {
		if s.at[stageAnswer].IsZero() {
			t.Errorf("%s (%s) never answered at the client; stages seen: %v", s.name, s.ip, s.at)
		}
	}
}

// frrStages sets s's FRR stages (a cluster whose speakers write FRR's
// file: FRR mode, FRR-K8s): when the first node's file held s's
// address, as this process read it at the speaker's SIGHUP, and when
// frr-reload.py first finished applying a file that held it. Between
// allocation and the first is the speaker's debounce (MetalLB's and
// FRR-K8s' default 3 s); between the two, reloads queued and run.
func frrStages(c *Cluster, s *serviceStages) {
	for _, f := range c.frrs {
		read, applied := f.FirstWith(" "+s.ip+"/32", s.start())
		if !read.IsZero() && (s.at[stageFRRFile].IsZero() || read.Before(s.at[stageFRRFile])) {
			s.at[stageFRRFile] = read
		}
		if !applied.IsZero() && (s.at[stageFRRApplied].IsZero() || applied.Before(s.at[stageFRRApplied])) {
			s.at[stageFRRApplied] = applied
		}
	}
}

// hasPools reports whether c's speaker reads MetalLB's IPAddressPools
// (every MetalLB speaker from 0.13 on, which the CCM's CRD mode writes).
func hasPools(c *Cluster) bool {
	return c.cloud.KubeVIP == "" && !c.cloud.Legacy
}

// formatStages is the stage table: per stage, the p50, p99 and max of
// the time since creation, and how many Services reached it.
func formatStages(svcs []*serviceStages) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d Services created at once, time since creation per stage:\n", len(svcs))
	fmt.Fprintf(&b, "  %-40s %8s %8s %8s %s\n", "stage", "p50", "p99", "max", "seen")
	for stage, name := range stageNames {
		var ds []time.Duration
		for _, s := range svcs {
			if !s.at[stage].IsZero() {
				// Seen before its clock started: 0.
				ds = append(ds, max(0, s.at[stage].Sub(s.start())))
			}
		}
		if len(ds) == 0 {
			fmt.Fprintf(&b, "  %-40s %8s %8s %8s 0/%d\n", name, "-", "-", "-", len(svcs))
			continue
		}
		slices.Sort(ds)
		q := func(f float64) string {
			return fmt.Sprintf("%.2fs", ds[int(f*float64(len(ds)-1))].Seconds())
		}
		fmt.Fprintf(&b, "  %-40s %8s %8s %8s %d/%d\n", name, q(0.5), q(0.99), q(1), len(ds), len(svcs))
	}
	return b.String()
}

// formatSlowest is the way of the n Services that answered last, stage by
// stage, with the probe's failed requests: where a tail of the table
// comes from.
func formatSlowest(svcs []*serviceStages, n int) string {
	answered := func(s *serviceStages) time.Duration {
		if s.at[stageAnswer].IsZero() {
			return time.Duration(1<<63 - 1)
		}
		return s.at[stageAnswer].Sub(s.start())
	}
	sorted := slices.Clone(svcs)
	slices.SortFunc(sorted, func(a, b *serviceStages) int { return cmp.Compare(answered(b), answered(a)) })
	var b strings.Builder
	fmt.Fprintf(&b, "the %d Services that answered last, time since creation per stage:\n", n)
	for _, s := range sorted[:min(n, len(sorted))] {
		fmt.Fprintf(&b, "  %s (%s):", s.name, s.ip)
		for stage, name := range stageNames {
			at := "-"
			if !s.at[stage].IsZero() {
				at = fmt.Sprintf("%.2fs", max(0, s.at[stage].Sub(s.start())).Seconds())
			}
			fmt.Fprintf(&b, " %s %s;", name, at)
		}
		fmt.Fprintf(&b, " %d failed requests before the answer", s.failedAsks)
		if s.lastAskErr != "" {
			fmt.Fprintf(&b, " (the last: %s)", s.lastAskErr)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// answerProbe is the stage table's HTTP client. A connection that is not
// accepted within probeConnect is given up and tried again: a SYN the
// path drops (no route, or no kube-proxy rule yet) is otherwise sent
// again only after TCP's 1 s, and a probe with the monitor's 2 s timeout
// saw a path that began to work up to a second late. Once connected, the
// answer may take the monitor's 2 s.
func answerProbe(c *Cluster) *http.Client {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(ctx, probeConnect)
				defer cancel()
				return c.Dial(ctx, network, "", addr)
			},
		},
	}
}

// probeConnect bounds one connection attempt of answerProbe: the path
// from the client to a pod is a few netns hops on this machine, answered
// in well under a millisecond when it works.
const probeConnect = 300 * time.Millisecond

// proxiedAt is the set of addresses node n's kube-proxy has a
// load-balancer rule for in its nat table (iptables mode: "-d <ip>/32 …
// loadbalancer IP").
func proxiedAt(n *Node) map[string]bool {
	out, _ := outputInNS(n.NetNS, "iptables-save", "-t", "nat")
	got := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "loadbalancer IP") {
			continue
		}
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "-d" {
				got[strings.TrimSuffix(f[i+1], "/32")] = true
			}
		}
	}
	return got
}

// watchRoutes follows router r's kernel table (ip monitor) and calls seen
// with each IPv4 address BIRD installs a route for, as the change is read,
// until ctx ends: no polling. The routes already there are reported once,
// after the monitor has started, so none falls between the two.
func watchRoutes(ctx context.Context, r *Router, seen func(ip string, at time.Time)) error {
	cmd := exec.CommandContext(ctx, "ip", "-n", r.Name, "-4", "monitor", "route")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ip monitor route at %s: %w", r.Name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			// "198.18.0.59 proto bird metric 32", then a line per next
			// hop; a withdrawal begins with "Deleted".
			line := sc.Text()
			if f := strings.Fields(line); len(f) > 0 && f[0] != "Deleted" && strings.Contains(line, " proto bird") {
				seen(strings.TrimSuffix(f[0], "/32"), time.Now())
			}
		}
		_ = cmd.Wait()
	}()
	now := time.Now()
	for ip := range routedAt(r) {
		seen(ip, now)
	}
	return nil
}

// routedAtRouters is routedAt of each router, in c.Routers' order.
func routedAtRouters(c *Cluster) []map[string]bool {
	out := make([]map[string]bool, len(c.Routers))
	for i, r := range c.Routers {
		out[i] = routedAt(r)
	}
	return out
}

// routedAt is the set of addresses the router's kernel has a BGP route
// for (IPv4 host routes BIRD installed).
func routedAt(r *Router) map[string]bool {
	out, _ := exec.Command("ip", "-n", r.Name, "-4", "route", "show", "proto", "bird").Output()
	got := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			got[strings.TrimSuffix(f[0], "/32")] = true
		}
	}
	return got
}

// deleteAndSettle deletes the Services and waits until they are gone and
// no router routes their addresses any more, so that what follows is not
// measured while the cluster is still busy with them.
func deleteAndSettle(t *testing.T, c *Cluster, svcs []*serviceStages) {
	t.Helper()
	ctx := context.Background()
	for _, s := range svcs {
		_ = c.Client.CoreV1().Services(metav1.NamespaceDefault).Delete(ctx, s.name, metav1.DeleteOptions{})
	}
	var left []string
	for end := time.Now().Add(3 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		left = left[:0]
		routes := routedAtRouters(c)
		for _, s := range svcs {
			_, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, s.name, metav1.GetOptions{})
			if err == nil || routes[0][s.ip] || routes[1][s.ip] {
				left = append(left, s.name)
			}
		}
		if len(left) == 0 {
			return
		}
	}
	t.Errorf("3 minutes after they were deleted, %d Services (or their routes) are still there: %v", len(left), left)
}

// allocationFailures counts the AllocationFailed Events MetalLB's
// controller gave the burst's Services: each is an address asked for
// before its pool was there, allocated only at MetalLB's next
// reprocessing of every Service.
func allocationFailures(ctx context.Context, c *Cluster, svcs []*serviceStages) string {
	evs, err := c.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=AllocationFailed"})
	if err != nil {
		return fmt.Sprintf("AllocationFailed Events not read: %v", err)
	}
	ours := map[string]bool{}
	for _, s := range svcs {
		ours[s.name] = true
	}
	total, hit := 0, map[string]bool{}
	// By what MetalLB says, the Service's name taken out: "no available
	// IPs" is a Service that asks for no address yet (MetalLB tries its
	// auto-assigned pools, and the CCM's have autoAssign false); the
	// others name an address asked for before MetalLB had its pool.
	why := map[string]int{}
	for _, e := range evs.Items {
		if ours[e.InvolvedObject.Name] {
			n := int(max(e.Count, 1))
			total += n
			hit[e.InvolvedObject.Name] = true
			why[strings.ReplaceAll(e.Message, e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name, "…")] += n
		}
	}
	var lines []string
	for msg, n := range why {
		lines = append(lines, fmt.Sprintf("%5d  %s", n, msg))
	}
	sort.Sort(sort.Reverse(sort.StringSlice(lines)))
	if len(lines) > 5 {
		lines = append(lines[:5], fmt.Sprintf("  and %d more kinds", len(lines)-5))
	}
	return fmt.Sprintf("MetalLB's controller: %d AllocationFailed Events, for %d of the %d Services:\n  %s",
		total, len(hit), len(svcs), strings.Join(lines, "\n  "))
}
