//go:build cluster && linux

package cluster

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// What TestCloudTraffic does under the client's steady traffic (Monitor):
// the CCM's own failures, each of which must cost no request, and a node's
// failure, whose cost is measured with the default BGP timers and with the
// fastest ones.

const (
	ccmDeployment = "cloud-provider-equinix-metal"
	ccmContainer  = "cloud-provider-equinix-metal"
	ccmLease      = "cloud-controller-manager"
)

// noneLost tallies the requests since began, logs each target's line and
// fails the test for each failed request: the event was the CCM's alone,
// and the data plane must not notice it.
func noneLost(t *testing.T, c *Cluster, m *Monitor, event string, began time.Time) {
	t.Helper()
	for _, tl := range m.Since(began) {
		ip := m.Targets()[tl.Target]
		// A packet the gateway got is a request that failed or, when the
		// gateway's ICMP was rate-limited, answered late on TCP's retry.
		t.Logf("%s: %s; packets the gateway got for it: %s", event, tl.Window(began), c.strays.Tally(ip, began, time.Now()))
		if tl.Failed > 0 {
			from, to := tl.First.Add(-3*time.Second), tl.Last.Add(time.Second)
			t.Errorf("%s cost %s %d failed requests: want 0 (the CCM is not in the data path); the routers' kernel tables changed for it meanwhile:\n%s\nthe gateway received for it (from 3 s before; it has no route to an Elastic IP):\n%s%s",
				event, tl.Target, tl.Failed, routeChangesAround(c, ip, tl.First, tl.Last), c.strays.strayLines(ip, from, to), strayFlows(c, ip, from, to))
		}
	}
}

// strayFlows says, of each flow that reached the gateway for ip in [from,
// to], what the gateway got of it before and what its sender's
// connection tracking holds for it now: a node forwards a packet for an
// Elastic IP when its kube-proxy has no rule for it or when the packet
// belongs to a tracked connection that was never DNATed.
func strayFlows(c *Cluster, ip string, from, to time.Time) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, st := range c.strays.Between(ip, from, to) {
		flow := st.Proto + " " + st.Src + " -> " + st.Dst
		if seen[flow] {
			continue
		}
		seen[flow] = true
		fmt.Fprintf(&b, "\nflow %s:", flow)
		for _, earlier := range c.strays.Flow(st.Src, st.Dst) {
			if earlier.At.Before(from) {
				fmt.Fprintf(&b, "\n  earlier at the gateway: %s", earlier)
			}
		}
		for _, n := range c.Nodes {
			if n.Name != st.From || (st.Proto != "tcp" && st.Proto != "udp") {
				continue
			}
			srcIP, sport, _ := net.SplitHostPort(st.Src)
			_, dport, _ := net.SplitHostPort(st.Dst)
			out, err := outputInNS(n.NetNS, "conntrack", "-L", "-p", st.Proto,
				"--orig-src", srcIP, "--orig-dst", ip, "--sport", sport, "--dport", dport)
			fmt.Fprintf(&b, "\n  %s's conntrack entry now (err %v):\n  %s", n.Name, err, strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "\n  "))
		}
	}
	return b.String()
}

// routeChangesAround lists both routers' kernel route changes for ip from
// 3 s before first to 1 s after last ("none" when there were none).
func routeChangesAround(c *Cluster, ip string, first, last time.Time) string {
	var out []string
	for _, r := range c.Routers {
		for _, l := range r.RouteChanges(ip, first.Add(-3*time.Second), last.Add(time.Second)) {
			out = append(out, r.Name+": "+l)
		}
	}
	if len(out) == 0 {
		return "  none"
	}
	return "  " + strings.Join(out, "\n  ")
}

// leaseHolder is the CCM's Lease holder ("" when none, or released).
func leaseHolder(ctx context.Context, c *Cluster) string {
	l, err := c.Client.CoordinationV1().Leases(CCMNamespace).Get(ctx, ccmLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// ccmPods are the CCM's pods, by name.
func ccmPods(ctx context.Context, c *Cluster) ([]corev1.Pod, error) {
	l, err := c.Client.CoreV1().Pods(CCMNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + ccmDeployment})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// leaderPod is the pod of the Lease's holder. With hostNetwork the
// holder's identity is its node's hostname and a random suffix, and two
// replicas never share a node (both would bind the node's ports). Right
// after an event that replaced pods the holder may be a pod being deleted
// (its Lease is about to move) or one the API does not list yet, so it
// asks again for up to a minute.
func leaderPod(ctx context.Context, c *Cluster) (*corev1.Pod, error) {
	var last error
	for end := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		holder := leaseHolder(ctx, c)
		node, _, _ := strings.Cut(holder, "_")
		pods, err := ccmPods(ctx, c)
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("no CCM pod on %q that is not being deleted (Lease holder %q)", node, holder)
			for i, p := range pods {
				if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
					return &pods[i], nil
				}
			}
		}
		if time.Now().After(end) {
			return nil, last
		}
	}
}

// waitRolledOut waits until the Deployment runs want replicas, all of its
// newest template and available.
func waitRolledOut(ctx context.Context, c *Cluster, want int32) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(CCMNamespace).Get(ctx, ccmDeployment, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := d.Status
		last = fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d", d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas)
		return s.ObservedGeneration == d.Generation && s.Replicas == want && s.UpdatedReplicas == want && s.AvailableReplicas == want, nil
	})
	if err != nil {
		return fmt.Errorf("the CCM's Deployment did not roll out (%s): %w; %s", last, err, c.podSummary(CCMNamespace))
	}
	return nil
}

// leaderWatch polls the Lease every 100 ms until end and records each
// change of holder with its time.
type leaderWatch struct {
	mu      sync.Mutex
	changes []leaderChange
	// deleted: when each CCM pod was first seen being deleted (its
	// containers then get SIGTERM).
	deleted map[string]time.Time
	done    chan struct{}
	stop    context.CancelFunc
}

type leaderChange struct {
	at     time.Time
	holder string
}

func watchLeader(c *Cluster) *leaderWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaderWatch{done: make(chan struct{}), stop: cancel, deleted: map[string]time.Time{}}
	go func() {
		defer close(w.done)
		last := leaseHolder(ctx, c)
		for ctx.Err() == nil {
			if h := leaseHolder(ctx, c); h != last && ctx.Err() == nil {
				w.mu.Lock()
				w.changes = append(w.changes, leaderChange{time.Now(), h})
				w.mu.Unlock()
				last = h
			}
			pods, _ := ccmPods(ctx, c)
			w.mu.Lock()
			for _, p := range pods {
				if _, seen := w.deleted[p.Name]; !seen && p.DeletionTimestamp != nil {
					w.deleted[p.Name] = time.Now()
				}
			}
			w.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

// end stops the watch.
func (w *leaderWatch) end() {
	w.stop()
	<-w.done
}

// holderAfter is when, after from, the Lease first got a holder other
// than old ("" = none), zero if it has not yet.
func (w *leaderWatch) holderAfter(from time.Time, old string) (time.Time, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.changes {
		if ch.at.After(from) && ch.holder != "" && ch.holder != old {
			return ch.at, ch.holder
		}
	}
	return time.Time{}, ""
}

// addressed is how long a Service took to get its address, or why it got
// none.
type addressed struct {
	took    time.Duration
	ip      string
	err     error
	skipped bool
}

func (a addressed) String() string {
	if a.skipped {
		return "none created (make ci: see churnDuringEvents)"
	}
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("address %s after %s", a.ip, a.took.Round(100*time.Millisecond))
}

// churnDuringEvents: Services are created (and deleted) during the
// CCM's events only in a full run. A Service created under traffic has
// cost another Service's clients a request now and then (a router briefly
// without its route as the speakers re-announced; TESTING.md): that is
// measured by make cluster-test, and make ci, which must not fail by
// chance, counts the CCM's events alone.
func churnDuringEvents() bool { return fullRun() }

// createForAddress creates a Cluster-policy Service (the web pods) in a
// goroutine and returns a channel that gets how long it took to have its
// address (skipped unless churnDuringEvents), waiting up to 2 minutes.
func createForAddress(c *Cluster, name string) <-chan addressed {
	return createForAddressWithin(c, name, 2*time.Minute)
}

// createForAddressWithin is createForAddress waiting up to within: a
// Service created as an outage begins waits for all of it.
func createForAddressWithin(c *Cluster, name string, within time.Duration) <-chan addressed {
	out := make(chan addressed, 1)
	if !churnDuringEvents() {
		out <- addressed{skipped: true}
		return out
	}
	go func() {
		began := time.Now()
		ctx := context.Background()
		if _, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, LoadBalancerService(name, "web", corev1.ServiceExternalTrafficPolicyCluster), metav1.CreateOptions{}); err != nil {
			out <- addressed{err: err}
			return
		}
		ip, err := serviceIngressWithin(c, name, within)
		if err != nil {
			err = fmt.Errorf("Service %s: no address within %s: %w", name, within, err)
		}
		out <- addressed{took: time.Since(began), ip: ip, err: err}
	}()
	return out
}

// rollingUpgrade is `helm upgrade` of the CCM to a new pod template (as
// a new image would give): both replicas are replaced one at a time. A
// Service created as it starts gets its address, and no request fails.
func rollingUpgrade(t *testing.T, c *Cluster, m *Monitor) {
	t.Helper()
	ctx := context.Background()
	leader, err := leaderPod(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	old := leaseHolder(ctx, c)
	w := watchLeader(c)
	began := m.Mark()
	if err := c.UpgradeCloud(ctx, map[string]any{"podAnnotations": map[string]any{"test.cluster/upgraded": began.Format(time.RFC3339Nano)}}); err != nil {
		t.Fatal(err)
	}
	took := <-createForAddress(c, "during-upgrade")
	if err := waitRolledOut(ctx, c, 2); err != nil {
		t.Fatal(err)
	}
	// The Deployment counts itself rolled out once the old leader is
	// terminating, which may be before it has released the Lease and a
	// new replica taken it (seen once, 2026-12-01): the watch stays until
	// a new holder is seen, for as long as a Lease runs (15 s) and more.
	acquired, holder := w.holderAfter(began, old)
	for end := time.Now().Add(30 * time.Second); acquired.IsZero() && time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		acquired, holder = w.holderAfter(began, old)
	}
	w.end()
	m.QuietFor(began, 5*time.Second, time.Minute)
	t.Logf("helm upgrade of the CCM (both replicas replaced) took %s; a Service created as it began: %v", time.Since(began).Round(100*time.Millisecond), took)
	sigterm, deleted := w.deleted[leader.Name]
	switch {
	case !deleted || acquired.IsZero():
		t.Errorf("helm upgrade: the old leader %s (%q) deleted %v, new Lease holder %q: want both seen", leader.Name, old, deleted, holder)
	default:
		t.Logf("helm upgrade: old leader %s deleted (SIGTERM) -> %q holds the Lease: %s", leader.Name, holder, acquired.Sub(sigterm).Round(100*time.Millisecond))
	}
	if took.err != nil {
		t.Errorf("a Service created during the upgrade: %v", took.err)
	}
	noneLost(t, c, m, "helm upgrade of the CCM", began)
}

// killLeader kills the leading CCM's process (kill -9): the other replica
// takes the Lease once it runs out, a Service created meanwhile gets its
// address then, and no request fails.
func killLeader(t *testing.T, c *Cluster, m *Monitor) {
	t.Helper()
	ctx := context.Background()
	p, err := leaderPod(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	old := leaseHolder(ctx, c)
	w := watchLeader(c)
	began := m.Mark()
	n, err := c.KillContainer(ctx, CCMNamespace, p.Name, ccmContainer)
	if err != nil {
		t.Fatal(err)
	}
	took := <-createForAddress(c, "during-kill")
	var acquired time.Time
	var holder string
	for end := time.Now().Add(2 * time.Minute); acquired.IsZero() && time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		acquired, holder = w.holderAfter(began, old)
	}
	w.end()
	if err := waitRolledOut(ctx, c, 2); err != nil {
		t.Fatal(err)
	}
	m.QuietFor(began, 5*time.Second, time.Minute)
	if acquired.IsZero() {
		t.Errorf("kill -9 of the leader %s: no new Lease holder within 2 minutes", p.Name)
	} else {
		t.Logf("kill -9 of the leader %s (%d processes): new leader %q after %s; a Service created then: %v", p.Name, n, holder, acquired.Sub(began).Round(100*time.Millisecond), took)
	}
	if took.err != nil {
		t.Errorf("a Service created after the leader was killed: %v", took.err)
	}
	noneLost(t, c, m, "kill -9 of the CCM's leader", began)
}

// scaledToZero runs no CCM for away: nothing is withdrawn meanwhile (the
// speakers keep announcing what they were told), and when it is back
// nothing is reserved again and no Service's address moves.
func scaledToZero(t *testing.T, c *Cluster, m *Monitor, away time.Duration, watched map[string]string) {
	t.Helper()
	ctx := context.Background()
	scale := func(n int32) {
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
		if _, err := c.Client.AppsV1().Deployments(CCMNamespace).Patch(ctx, ccmDeployment, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reserved := len(c.Emu.Reservations(c.Emu.Projects()[0].ID))
	hopsBefore := map[string][]string{}
	for _, ip := range watched {
		hopsBefore[ip] = nexthops(t, c, ip)
	}
	began := m.Mark()
	scale(0)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := ccmPods(ctx, c)
		return err == nil && len(pods) == 0, nil
	}); err != nil {
		t.Fatalf("the CCM's pods did not go: %v (%s)", err, c.podSummary(CCMNamespace))
	}
	for end := time.Now().Add(away); time.Now().Before(end); time.Sleep(5 * time.Second) {
		for ip, before := range hopsBefore {
			if now := nexthops(t, c, ip); !slices.Equal(now, before) {
				t.Errorf("with no CCM running, the routers' paths for %s changed: %v, were %v", ip, now, before)
				delete(hopsBefore, ip)
			}
		}
	}
	back := time.Now()
	scale(2)
	if err := waitRolledOut(ctx, c, 2); err != nil {
		t.Fatal(err)
	}
	// Give the new leader time to act on everything it finds.
	time.Sleep(15 * time.Second)
	m.QuietFor(began, 5*time.Second, time.Minute)
	t.Logf("CCM scaled to 0 for %s, back after %s", away, time.Since(back).Round(100*time.Millisecond))
	if now := len(c.Emu.Reservations(c.Emu.Projects()[0].ID)); now != reserved {
		t.Errorf("after the CCM came back: %d IP reservations, %d before: want none new or gone", now, reserved)
	}
	for name, ip := range watched {
		got, err := serviceIngress(c, name)
		if err != nil || got != ip {
			t.Errorf("after the CCM came back Service %s has address %q (%v): want %s unchanged", name, got, err, ip)
		}
	}
	noneLost(t, c, m, "the CCM scaled to 0 and back", began)
}

// nodeDownBlackHole takes node-2 off the network under the monitor and
// returns, per watched Service, how long its clients kept failing. With
// Cluster policy kube-proxy on the other nodes also sends a share of
// requests to node-2's pod until Kubernetes marks the node NotReady
// (kube-controller-manager's node-monitor-grace-period) and drops the pod
// from the endpoints; with Local policy only the BGP hold time counts.
// With back, it brings node-2 back and waits for its sessions and its
// Ready condition before it returns.
func nodeDownBlackHole(t *testing.T, c *Cluster, m *Monitor, label string, back bool) map[string]time.Duration {
	t.Helper()
	n2 := c.Nodes[1]
	targets := m.Targets()
	began := m.Mark()
	if err := c.SetNodeLink(n2, false); err != nil {
		t.Fatal(err)
	}
	// The routers' next hops are the node's IPv4 address for an IPv4
	// route and its IPv6 one for an IPv6 route.
	n2IPs := []string{n2.IP}
	if n2.IPv6 != "" {
		n2IPs = append(n2IPs, n2.IPv6)
	}
	outOfPaths := make(chan time.Duration, 1)
	go func() { outOfPaths <- nodeOutOfPaths(c, n2IPs, targets, began, 4*time.Minute) }()
	quiet := m.QuietFor(began, 10*time.Second, 4*time.Minute)
	if d := <-outOfPaths; d > 0 {
		t.Logf("node-2 down (%s): both routers dropped it from every watched address's paths after %s", label, d.Round(10*time.Millisecond))
	}
	for name, ip := range m.Targets() {
		if hops := nexthops(t, c, ip); slices.ContainsFunc(n2IPs, func(a string) bool { return slices.Contains(hops, a) }) {
			proto, _ := c.Routers[0].Birdc("show", "protocols", "all", "node2")
			t.Errorf("node-2 down (%s): the routers still forward %s's %s to it; %s says of node2: %s", label, name, ip, c.Routers[0].Name, linesWith(proto, "BGP state", "Last error", "estart", "Hold timer"))
		}
	}
	out := map[string]time.Duration{}
	for _, tl := range m.Since(began) {
		out[tl.Target] = tl.BlackHole(began)
		t.Logf("node-2 down (%s): %s", label, tl.Window(began))
	}
	if !quiet {
		t.Errorf("node-2 down (%s): the clients still fail 4 minutes later", label)
	}
	if !back {
		t.Cleanup(func() { _ = c.SetNodeLink(n2, true) })
		return out
	}
	if err := c.SetNodeLink(n2, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.WaitSessions(ctx, false); err != nil {
		t.Fatalf("after node-2 came back: %v", err)
	}
	// Its Ready condition too: the endpoints on it are back.
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, n2.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("node-2 not Ready again: %v", err)
	}
	return out
}

// nodeOutOfPaths polls the routers every 100 ms until no target's route
// has one of nodeIPs as a next hop, and returns how long after start that was
// (zero if not within limit): the routers' side of a node failure, which
// the BGP hold time or BFD decides, apart from what kube-proxy adds.
func nodeOutOfPaths(c *Cluster, nodeIPs []string, targets map[string]string, start time.Time, limit time.Duration) time.Duration {
	for time.Since(start) < limit {
		in := false
		for _, ip := range targets {
			for _, r := range c.Routers {
				hops, err := r.Nexthops(ip)
				in = in || err != nil || slices.ContainsFunc(nodeIPs, func(a string) bool { return slices.Contains(hops, a) })
			}
		}
		if !in {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0
}

// equinixDown makes every Equinix API call fail (each connection reset)
// for away, while a Service is created and another deleted: both wait,
// nothing already serving moves, and once the API is back the new Service
// gets its address and the deleted one's Elastic IP is released.
// readinessAsked is how long into Equinix's outage equinixDown runs the
// troubleshooting page's readiness block: past the equinix-api check's 30 s
// (counted from the first failed call, at the outage's start).
const readinessAsked = 38 * time.Second

func equinixDown(t *testing.T, c *Cluster, m *Monitor, away time.Duration, gone string) {
	t.Helper()
	ctx := context.Background()
	ns := metav1.NamespaceDefault
	hopsBefore := map[string][]string{}
	for _, ip := range m.Targets() {
		hopsBefore[ip] = nexthops(t, c, ip)
	}
	churn := churnDuringEvents()
	var goneIP string
	if churn {
		var err error
		if goneIP, err = serviceIngress(c, gone); err != nil {
			t.Fatal(err)
		}
	}
	began := m.Mark()
	c.Emu.SetFault(emulator.AllRoutes, emulator.Fault{ResetShare: 1})
	defer c.Emu.ClearFaults()
	added := createForAddressWithin(c, "while-equinix-down", away+2*time.Minute)
	if churn {
		if err := c.Client.CoreV1().Services(ns).Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	askedReadiness := false
	for end := time.Now().Add(away); time.Now().Before(end); time.Sleep(5 * time.Second) {
		// Once the API has not answered for longer than the readiness
		// check allows (30 s), ask the leader as the troubleshooting
		// page says to.
		if !askedReadiness && time.Since(began) > readinessAsked {
			readinessByHand(t, c)
			askedReadiness = true
		}
		for ip, before := range hopsBefore {
			if now := nexthops(t, c, ip); !slices.Equal(now, before) {
				t.Errorf("with Equinix's API down, the routers' paths for %s changed: %v, were %v", ip, now, before)
				delete(hopsBefore, ip)
			}
		}
	}
	s, err := c.Client.CoreV1().Services(ns).Get(ctx, "while-equinix-down", metav1.GetOptions{})
	if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
		t.Errorf("Service while-equinix-down got %v with Equinix's API down", s.Status.LoadBalancer.Ingress)
	}
	if !askedReadiness {
		t.Logf("Equinix's API down for %s only: the troubleshooting page's readiness block is run after %s", away, readinessAsked)
	}
	injected := c.Emu.InjectedFaults()
	back := time.Now()
	c.Emu.ClearFaults()
	got := <-added
	switch {
	case got.err != nil:
		t.Errorf("the Service created while Equinix's API was down: %v", got.err)
	case got.skipped:
		t.Logf("Equinix's API down for %s (%v injected); %v", away, injected, got)
	default:
		t.Logf("Equinix's API down for %s (%v injected): the Service created meanwhile got its address %s after the API came back", away, injected, time.Since(back).Round(100*time.Millisecond))
	}
	// The deleted Service's Elastic IP is released once the API is back.
	err = nil
	if churn {
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Services(ns).Get(ctx, gone, metav1.GetOptions{})
			if err == nil {
				return false, nil
			}
			for _, r := range c.Emu.Reservations(c.Emu.Projects()[0].ID) {
				if r.Prefix.Addr().String() == goneIP {
					return false, nil
				}
			}
			return true, nil
		})
	}
	if err != nil {
		t.Errorf("Service %s deleted while Equinix's API was down: it or its Elastic IP %s is still there 2 minutes after the API came back", gone, goneIP)
	}
	m.QuietFor(began, 5*time.Second, time.Minute)
	noneLost(t, c, m, "Equinix's API down", began)
}

// apiserverRestart restarts kube-apiserver (SIGTERM, then the same flags
// again) under the monitor: the speakers keep announcing what they know,
// the CCM reconnects (or, past its renew deadline, hands over its Lease),
// and no request fails. A Service created once it is back gets its
// address.
func apiserverRestart(t *testing.T, c *Cluster, m *Monitor) {
	t.Helper()
	ctx := context.Background()
	old := leaseHolder(ctx, c)
	began := m.Mark()
	gone, err := c.Env.RestartAPIServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	took := <-createForAddress(c, "after-apiserver")
	if took.err != nil {
		t.Errorf("a Service created after kube-apiserver's restart: %v", took.err)
	}
	if err := waitRolledOut(ctx, c, 2); err != nil {
		t.Fatal(err)
	}
	// The kubelets come back on their own backoff (up to 7 s between
	// tries); what follows (a drain) needs them and the scheduler watching
	// again, or a pod is placed on a node the test has just cordoned.
	if err := waitNodeLeasesRenewed(ctx, c, back); err != nil {
		t.Fatal(err)
	}
	m.QuietFor(began, 5*time.Second, time.Minute)
	t.Logf("kube-apiserver restarted (%s until ready again); Lease holder %q, was %q; a Service created then: %v", gone.Round(100*time.Millisecond), leaseHolder(ctx, c), old, took)
	noneLost(t, c, m, "kube-apiserver restarted", began)
}

// waitNodeLeasesRenewed waits until every node's kubelet has renewed its
// Lease since since: each is talking to kube-apiserver again.
func waitNodeLeasesRenewed(ctx context.Context, c *Cluster, since time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var stale []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		stale = stale[:0]
		for _, n := range c.Nodes {
			l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil || l.Spec.RenewTime.Time.Before(since) {
				stale = append(stale, n.Name)
			}
		}
		return len(stale) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("kubelets of %v have not renewed their Lease since kube-apiserver came back: %w", stale, err)
	}
	return nil
}

// peerHoldTimes lists the holdTime of each of MetalLB's BGPPeers
// ("node-1-0=3s node-1-1=unset ...").
func peerHoldTimes(c *Cluster) string {
	dyn, err := dynamic.NewForConfig(c.Env.Config)
	if err != nil {
		return err.Error()
	}
	gvr := schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}
	l, err := dyn.Resource(gvr).Namespace(metallbNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range l.Items {
		h, ok, _ := unstructured.NestedString(p.Object, "spec", "holdTime")
		if !ok {
			h = "unset"
		}
		out = append(out, p.GetName()+"="+h)
	}
	return strings.Join(out, " ")
}

// ccmLogLines are the lines of the CCM containers' logs (read from the
// nodes' disks) that contain any of words, the last 20.
func ccmLogLines(c *Cluster, words ...string) string {
	return lastCCMLogLines(c, 20, words...)
}

// lastCCMLogLines is ccmLogLines keeping the last n lines, in the order
// they were written over all replicas (the container log's own timestamp
// leads each line): in node order, the last lines could be one replica's
// and cut off the leader's.
func lastCCMLogLines(c *Cluster, keep int, words ...string) string {
	type line struct {
		at   time.Time
		text string
	}
	var out []line
	for _, n := range c.Nodes {
		files, _ := filepath.Glob(filepath.Join(n.Dir, "pod-logs", CCMNamespace+"_"+ccmDeployment+"-*", ccmContainer, "*.log"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				for _, w := range words {
					if strings.Contains(l, w) {
						stamp, _, _ := strings.Cut(l, " ")
						at, _ := time.Parse(time.RFC3339Nano, stamp)
						out = append(out, line{at, n.Name + ": " + l})
						break
					}
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b line) int { return a.at.Compare(b.at) })
	if len(out) > keep {
		out = out[len(out)-keep:]
	}
	var lines []string
	for _, l := range out {
		lines = append(lines, l.text)
	}
	return strings.Join(lines, "\n")
}

var bgpAdvertisements = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"}

// ownedDeleted deletes what the CCM wrote of one kind in metallb-system
// (selector: which of them; the CCM owns them all), as a user cleaning up
// by hand might, and waits for the CCM to put it back (failing after 2
// minutes). What the client lost meanwhile is printed, not asserted: the
// delete is the user's, and MetalLB's reaction to it is MetalLB's. A pool
// deleted makes MetalLB clear its Service's status, a change the CCM
// acts on anyway; the BGPAdvertisements deleted change no Service, and
// before the CCM's watches asked for a sync on a delete, nothing put them
// back until something else changed.
func ownedDeleted(t *testing.T, c *Cluster, m *Monitor, res schema.GroupVersionResource, selector string) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	objs := dyn.Resource(res).Namespace(metallbNamespace)
	list, err := objs.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("the CCM's %s (%s): %v, %d found", res.Resource, selector, err, len(list.Items))
	}
	old := map[string]types.UID{}
	for _, o := range list.Items {
		old[o.GetName()] = o.GetUID()
	}
	what := fmt.Sprintf("%s %s", res.Resource, strings.Join(slices.Sorted(maps.Keys(old)), ", "))
	began := m.Mark()
	for name := range old {
		if err := objs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// back: when every one was there again, as a new object.
	var back time.Duration
	for end := began.Add(2 * time.Minute); back == 0 && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		renewed := 0
		for name, uid := range old {
			if o, err := objs.Get(ctx, name, metav1.GetOptions{}); err == nil && o.GetUID() != uid {
				renewed++
			}
		}
		if renewed == len(old) {
			back = time.Since(began)
		}
	}
	if back == 0 {
		for _, tl := range m.Since(began) {
			t.Logf("%s deleted by hand, not put back: %s", what, tl.Window(began))
		}
		t.Fatalf("%s deleted by hand: not put back within 2 minutes; the module's syncs meanwhile:\n%s", what, lastCCMLogLines(c, 20, "sync.go", "failures.go"))
	}
	m.QuietFor(began, 5*time.Second, time.Minute)
	for _, tl := range m.Since(began) {
		t.Logf("%s deleted by hand, put back after %s: %s", what, back.Round(10*time.Millisecond), tl.Window(began))
	}
}
