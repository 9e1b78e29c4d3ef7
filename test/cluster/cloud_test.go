//go:build cluster && linux

package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// cloudOptions reads what make cluster-test passes: the CCM's image, and
// MetalLB's manifest and binaries.
func cloudOptions(t *testing.T) *CloudOptions {
	t.Helper()
	o := &CloudOptions{
		CCMImage:        os.Getenv("METAL_CCM_CLUSTER_CCM_IMAGE"),
		MetalLBManifest: os.Getenv("METAL_CCM_CLUSTER_METALLB_MANIFEST"),
		MetalLBBins:     os.Getenv("METAL_CCM_CLUSTER_METALLB_BINS"),
		Agnhost:         os.Getenv("METAL_CCM_CLUSTER_AGNHOST"),
	}
	if o.CCMImage == "" || o.MetalLBManifest == "" || o.MetalLBBins == "" || o.Agnhost == "" {
		t.Fatal("METAL_CCM_CLUSTER_{CCM_IMAGE,METALLB_MANIFEST,METALLB_BINS,AGNHOST} unset: run make cluster-test")
	}
	return o
}

func startCloud(t *testing.T, o *CloudOptions) *Cluster {
	t.Helper()
	return startFor(t, Options{Cloud: o, Timeout: 6 * time.Minute})
}

func waitAvailable(t *testing.T, c *Cluster, name string, want int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == want, nil
	})
	if err != nil {
		t.Fatalf("deployment %s: %d replicas not available: %v (%s)", name, want, err, c.podSummary(metav1.NamespaceDefault))
	}
}

func serviceIngress(c *Cluster, name string) (string, error) {
	return serviceIngressWithin(c, name, 2*time.Minute)
}

// serviceIngressWithin is serviceIngress waiting up to within.
func serviceIngressWithin(c *Cluster, name string, within time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ip, err := c.ServiceIngress(ctx, metav1.NamespaceDefault, name)
	if err != nil {
		return "", fmt.Errorf("%w; events: %s", err, c.events(metav1.NamespaceDefault, name))
	}
	return ip, nil
}

// get is one HTTP GET through the client netns.
func get(c *Cluster, src, url string) (string, error) {
	resp, err := c.ClientHTTP(src, 2*time.Second).Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	return strings.TrimSpace(string(b)), nil
}

// untilAnswers polls the URL from the client until it answers; it returns
// how long that took.
func untilAnswers(c *Cluster, url string, timeout time.Duration) (time.Duration, error) {
	began := time.Now()
	var last error
	for time.Since(began) < timeout {
		if _, err := get(c, "", url); err == nil {
			return time.Since(began), nil
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("no answer from %s after %s: %v", url, timeout, last)
}

// getSettled is get from src, asked again for up to 20 s while it fails:
// the first seconds after a Service is announced, a node whose kube-proxy
// has not yet programmed the new address answers for it with ICMP
// "network unreachable" (MetalLB's speaker and kube-proxy read the same
// status, each at its own pace; the stage table and the monitor count
// those seconds, this check is about where answers come from once
// settled). waited says how long it took.
func getSettled(c *Cluster, src, url string) (answer string, waited time.Duration, err error) {
	began := time.Now()
	for {
		if answer, err = get(c, src, url); err == nil || time.Since(began) > 20*time.Second {
			return answer, time.Since(began), err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nexthops is what both routers forward ip to, sorted and deduplicated.
func nexthops(t *testing.T, c *Cluster, ip string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range c.Routers {
		hops, err := r.Nexthops(ip)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hops {
			seen[h] = true
		}
	}
	var out []string
	for h := range seen {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// TestCloudTraffic is the short real-cluster check make ci runs: the CCM
// (chart, image) initialises three kubelets' nodes, MetalLB's speakers
// announce a Service's Elastic IP to two BIRD routers, and a client
// behind the routers reaches the pods through it over HTTP and UDP; an
// externalTrafficPolicy Local Service is announced only from the node with
// its pod and sees the client's address. Then, under a client that never
// stops asking (Monitor), the CCM is upgraded, its leader killed, it is
// scaled to 0 and back, Equinix's API and kube-apiserver go away, each
// costing no request; a Service's IPAddressPool and the BGPAdvertisements
// deleted by hand are put back and what the client lost is printed; a worker falls off
// the network with the default BGP timers and with the fastest, and the
// time its clients failed is printed; a worker is drained.
func TestCloudTraffic(t *testing.T) {
	c := startCloud(t, cloudOptions(t))
	ctx := context.Background()

	for _, n := range c.Nodes {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(node.Spec.ProviderID, "equinixmetal://") || node.Labels[corev1.LabelTopologyRegion] != Metro {
			t.Errorf("node %s: providerID %q, region %q: want equinixmetal://..., %s", n.Name, node.Spec.ProviderID, node.Labels[corev1.LabelTopologyRegion], Metro)
		}
		var internal []string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if len(internal) != 1 || internal[0] != n.IP {
			t.Errorf("node %s: InternalIP %v, want [%s]", n.Name, internal, n.IP)
		}
	}

	checkControlPlaneEIP(t, c)

	// Cluster policy, a pod on each worker.
	ip, created := clusterWeb(t, c)
	url := "http://" + net.JoinHostPort(ip, "80")
	took, err := untilAnswers(c, url+"/hostname", 2*time.Minute)
	if err != nil {
		t.Fatalf("%v; routers' next hops for %s: %v", err, ip, nexthops(t, c, ip))
	}
	t.Logf("Service web: Elastic IP %s answered the client %s after it was created", ip, (time.Since(created) - time.Since(created.Add(took))).Round(time.Millisecond))
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitSessions(sctx, false); err != nil {
		t.Fatal(err)
	}
	var hops []string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if hops = nexthops(t, c, ip); len(hops) == len(c.Nodes) {
			break
		}
	}
	if len(hops) != len(c.Nodes) {
		t.Errorf("routers forward %s to %v: want every node (ECMP; each runs a speaker and peers)", ip, hops)
	}
	// 16 client addresses: the routers' hashing spreads them over the nodes; the
	// node that took a request is the source the pod saw (kube-proxy
	// masquerades Cluster traffic).
	pods, via := map[string]int{}, map[string]int{}
	for _, src := range ClientIPs() {
		name, waited, err := getSettled(c, src, url+"/hostname")
		if err != nil {
			t.Errorf("from %s: %v", src, err)
			continue
		}
		if waited > time.Second {
			t.Logf("from %s: answered after %s of retries (a node's kube-proxy behind its speaker)", src, waited.Round(100*time.Millisecond))
		}
		pods[name]++
		cip, err := get(c, src, url+"/clientip")
		if err == nil {
			host, _, _ := net.SplitHostPort(cip)
			via[host]++
		}
	}
	t.Logf("16 client addresses through %s: pods %v; sources the pods saw %v; routers' next hops %v", ip, pods, via, hops)
	// What met the gateway meanwhile: requests a node forwarded because
	// its kube-proxy had no rule for the new address yet.
	t.Logf("packets for %s the gateway received since the Service was created, by sender: %s", ip, c.strays.Tally(ip, created, time.Now()))
	if len(pods) != 2 {
		t.Errorf("answers came from pods %v: want both", pods)
	}
	if len(via) < 2 {
		t.Errorf("requests entered through %v only: want several nodes", via)
	}
	got, err := c.UDPExchange("", net.JoinHostPort(ip, "90"), "hostname", 3*time.Second)
	if err != nil || pods[got] == 0 {
		t.Errorf("UDP hostname through %s:90 = %q, %v: want one of the pods %v", ip, got, err, pods)
	} else {
		t.Logf("UDP through %s:90 answered by %s", ip, got)
	}

	// Local policy: one pod, on node-3.
	localOnlyFromItsNode(t, c)

	// 50 Services created at once, each followed from creation to its
	// first answer at the client, stage by stage (printed, not asserted).
	// Those changes of MetalLB's configuration reset no session at the
	// routers.
	ups, err := c.SessionUps()
	if err != nil {
		t.Fatal(err)
	}
	stageTable(t, c, 50)
	t.Logf("50 Services created and deleted: %d session resets at the routers", sessionResets(t, c, ups))
	// What those syncs cost, read as docs/metrics.md tells users to, and
	// the troubleshooting page's first look.
	metricsByHand(t, c)
	firstLook(t, c, "web", ip)

	// From here on the client never stops asking web (Cluster) and
	// web-local (Local, a pod on each worker), and every event is tallied
	// in failed requests.
	lip := webLocal(t, c)
	m := c.Monitor()
	t.Cleanup(m.Stop)
	m.Watch("web", ip)
	m.Watch("web-local", lip)
	if !m.QuietFor(m.Mark(), 5*time.Second, time.Minute) {
		t.Fatalf("the monitor's requests fail before any event: %v", m.Since(time.Now().Add(-10*time.Second)))
	}
	// A request that met a node before its kube-proxy had the rule (web's
	// first answers above) left that node a connection-tracking entry
	// with no DNAT, which a later request reusing its source port follows
	// to the gateway for up to 120 s (see webLocal). Those entries age out
	// before any event is counted.
	// (A request that meets such an entry meanwhile renews it, and is
	// a stray of its own: hence the loop. Strays that never stop are a
	// fault of their own, which the events then count.)
	for bound := time.Now().Add(5 * time.Minute); time.Now().Before(bound); {
		last := c.strays.Last(ip, lip)
		wait := time.Until(last.Add(synSentTimeout + 5*time.Second))
		if last.IsZero() || wait <= 0 {
			break
		}
		t.Logf("waiting %s for the connection-tracking entries of the requests that reached a node before its kube-proxy rule (the last at %s) to expire", wait.Round(time.Second), last.Format("15:04:05.000"))
		time.Sleep(wait)
	}

	// The CCM's own failures cost no request.
	rollingUpgrade(t, c, m)
	killLeader(t, c, m)
	scaledToZero(t, c, m, outage(t), map[string]string{"web": ip, "web-local": lip})
	equinixDown(t, c, m, outage(t), "during-upgrade")
	// Not the CCM's failure: a user deleting what it wrote. Before
	// kube-apiserver's restart, after which the leader, unable to renew
	// its Lease for half a minute, exits and hands over.
	ownedDeleted(t, c, m, ipAddressPools, "service-web=namespace-default")
	ownedDeleted(t, c, m, bgpAdvertisements, sdk.OwnedLabel+"="+sdk.OwnedValue)
	apiserverRestart(t, c, m)

	// A node falls off the network, with the speakers' default BGP
	// timers (MetalLB's 90 s hold time) and then with the fastest the CCM
	// offers (3 s), set by a chart upgrade. Not in make ci, for its time
	// budget: TestCloudSpeakers measures a node failure with the fast
	// timers for every speaker.
	if fullRun() {
		slow := nodeDownBlackHole(t, c, m, "default BGP timers", true)
		fastTimers(t, c, m)
		fast := nodeDownBlackHole(t, c, m, "BGP hold time 3s", true)
		for _, name := range []string{"web", "web-local"} {
			t.Logf("node failure, %s: clients failed for %s with the default BGP timers, %s with hold time 3s", name, slow[name].Round(100*time.Millisecond), fast[name].Round(100*time.Millisecond))
		}
	}
	m.Stop()

	drainWorker(t, c, "node-3", lip)
}

// fullRun: make cluster-test (METAL_CCM_CLUSTER_FULL=1) runs the
// measurements make ci leaves out for its time budget.
func fullRun() bool { return os.Getenv("METAL_CCM_CLUSTER_FULL") == "1" }

// outage is how long scaledToZero keeps the CCM away and equinixDown
// Equinix's API: METAL_CCM_CLUSTER_OUTAGE (a Go duration, such as 2m);
// unless set, 5 minutes in a full run (long enough for the service
// controller's backoff on a Service made meanwhile to reach its longest
// step, 5 minutes) and 45 s in make ci, for its time budget (longer than
// readinessAsked).
func outage(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("METAL_CCM_CLUSTER_OUTAGE")
	if v == "" && fullRun() {
		return 5 * time.Minute
	}
	if v == "" {
		return 45 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("METAL_CCM_CLUSTER_OUTAGE=%q: want a positive Go duration such as 5m", v)
	}
	return d
}

// fastTimers upgrades the CCM with bgpHoldTime 3s and bgpKeepaliveTime 1s
// (chart values config.*): the module writes them into every BGPPeer and
// the speakers' sessions take them. Requests failed meanwhile are printed
// (a speaker may reset its sessions to take new timers).
func fastTimers(t *testing.T, c *Cluster, m *Monitor) {
	t.Helper()
	ctx := context.Background()
	began := m.Mark()
	if err := c.UpgradeCloud(ctx, map[string]any{"config": map[string]any{"bgpHoldTime": "3s", "bgpKeepaliveTime": "1s"}}); err != nil {
		t.Fatal(err)
	}
	if err := waitRolledOut(ctx, c, 2); err != nil {
		t.Fatal(err)
	}
	var proto string
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		proto, _ = c.Routers[0].Birdc("show", "protocols", "all", "node2")
		if strings.Contains(proto, "Hold timer:") && strings.Contains(linesWith(proto, "Hold timer"), "/3") {
			break
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.WaitSessions(sctx, false); err != nil {
		t.Fatal(err)
	}
	m.QuietFor(began, 5*time.Second, time.Minute)
	t.Logf("BGP hold time 3s, keepalive 1s set with a chart upgrade after %s; %s says of node2: %s", time.Since(began).Round(100*time.Millisecond), c.Routers[0].Name, linesWith(proto, "BGP state", "Hold timer", "Keepalive timer"))
	if !strings.Contains(linesWith(proto, "Hold timer"), "/3") {
		t.Errorf("after bgpHoldTime 3s the routers' sessions do not run a 3 s hold timer: %s; BGPPeers' holdTime: %s; the CCM says: %s",
			linesWith(proto, "Hold timer"), peerHoldTimes(c), ccmLogLines(c, "module", "sync", "warning", "Warning"))
	}
	for _, tl := range m.Since(began) {
		t.Logf("new BGP timers: %s", tl.Window(began))
	}
}

// webPods runs the Deployment "web": two agnhost netexec pods, one per
// worker, Available before it returns.
func webPods(t *testing.T, c *Cluster) {
	t.Helper()
	if _, err := c.Client.AppsV1().Deployments(metav1.NamespaceDefault).Create(context.Background(), NetexecDeployment("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, c, "web", 2)
}

// clusterWeb creates the Cluster-policy Service "web" with a pod on each
// worker and returns its Elastic IP and when the Service was created.
func clusterWeb(t *testing.T, c *Cluster) (string, time.Time) {
	t.Helper()
	ctx, ns := context.Background(), metav1.NamespaceDefault
	webPods(t, c)
	created := time.Now()
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, LoadBalancerService("web", "web", corev1.ServiceExternalTrafficPolicyCluster), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip, err := serviceIngress(c, "web")
	if err != nil {
		t.Fatalf("Service web got no ingress IP: %v", err)
	}
	return ip, created
}

// localOnlyFromItsNode creates the Local Service "local" with its one pod
// on node-3: the routers forward its Elastic IP to node-3 only, and the pod
// sees the client's own address. In a dual-stack cluster the Service is
// dual-stack and the same holds for its IPv6 address. It returns the
// addresses (ip6 "" in an IPv4 cluster) and the routers' next hops for the
// IPv4 one.
func localOnlyFromItsNode(t *testing.T, c *Cluster) (ip4, ip6 string, hops4 []string) {
	t.Helper()
	ctx := context.Background()
	ns := metav1.NamespaceDefault
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, NetexecDeployment("local", 1, "node-3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, c, "local", 1)
	svc := LoadBalancerService("local", "local", corev1.ServiceExternalTrafficPolicyLocal)
	if c.DualStack {
		policy := corev1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &policy
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c.DualStack {
		ip4, ip6 = dualIngress(t, c, "local")
	} else {
		var err error
		if ip4, err = serviceIngress(c, "local"); err != nil {
			t.Fatalf("Service local got no ingress IP: %v", err)
		}
	}
	node3 := c.Nodes[2]
	for _, tc := range []struct {
		ip, hop string
		clients []string
	}{{ip4, node3.IP, ClientIPs()}, {ip6, node3.IPv6, ClientIPs6()}} {
		if tc.ip == "" {
			continue
		}
		url := "http://" + net.JoinHostPort(tc.ip, "80")
		if _, err := untilAnswers(c, url+"/hostname", 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		// A speaker may announce before it learns where the endpoints
		// are: give the routers time to settle on their final paths.
		var hops []string
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
			if hops = nexthops(t, c, tc.ip); slices.Equal(hops, []string{tc.hop}) {
				break
			}
		}
		if !slices.Equal(hops, []string{tc.hop}) {
			t.Errorf("routers forward the Local Service's %s to %v: want node-3 (%s) only", tc.ip, hops, tc.hop)
		}
		if tc.ip == ip4 {
			hops4 = hops
		}
		for _, src := range tc.clients[:4] {
			cip, err := get(c, src, url+"/clientip")
			host, _, _ := net.SplitHostPort(cip)
			if err != nil || host != src {
				t.Errorf("Local Service from %s: the pod saw %q (%v): want the client's own address", src, cip, err)
			}
		}
	}
	return ip4, ip6, hops4
}

// checkControlPlaneEIP: the CCM assigns the control-plane Elastic IP to
// the control-plane node (the only one), the routers route it there as
// Equinix's network would, and a Kubernetes client outside the cluster
// reaches kube-apiserver through it (the external Service's rules on
// node-1 send it on).
func checkControlPlaneEIP(t *testing.T, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	eip, err := c.ControlPlaneEIP()
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := c.Client.CoreV1().Services("kube-system").Get(ctx, "cloud-provider-equinix-metal-kubernetes-external", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 || len(s.Spec.Ports) == 0 {
			return false, nil
		}
		port = s.Spec.Ports[0].Port
		return s.Status.LoadBalancer.Ingress[0].IP == eip, nil
	})
	if err != nil {
		t.Fatalf("the external control-plane Service has no ingress %s: %v; events: %s", eip, err, c.events("kube-system", "cloud-provider-equinix-metal-kubernetes-external"))
	}
	if got := c.assignedEIPs()[eip+"/32"]; got != c.Nodes[0].IP {
		t.Errorf("the control-plane EIP %s is assigned to %q: want node-1 (%s); fabric routes %v", eip, got, c.Nodes[0].IP, c.FabricRoutes())
	}
	kc, err := c.KubeThrough(net.JoinHostPort(eip, fmt.Sprint(port)))
	if err != nil {
		t.Fatal(err)
	}
	var version string
	var last error
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		v, err := kc.Discovery().ServerVersion()
		if err != nil {
			last = err
			return false, nil
		}
		version = v.GitVersion
		return true, nil
	})
	if err != nil {
		t.Fatalf("kube-apiserver not reached through the control-plane EIP %s:%d from the client: %v (last: %v); fabric routes %v", eip, port, err, last, c.FabricRoutes())
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != len(c.Nodes) {
		t.Fatalf("listing nodes through the control-plane EIP: %v (%d nodes)", err, len(nodes.Items))
	}
	t.Logf("control-plane EIP %s:%d (assigned to node-1) answered the Kubernetes API from the client: %s, %d nodes", eip, port, version, len(nodes.Items))
}

// synSentTimeout is how long Linux keeps the connection-tracking entry of
// a SYN that was never answered (nf_conntrack_tcp_timeout_syn_sent).
const synSentTimeout = 120 * time.Second

// webLocal creates the Local-policy Service "web-local" for the web pods
// (one on each worker) and returns its Elastic IP once both workers
// announce it and every node's kube-proxy has its rule.
//
// The second wait keeps the monitor's first requests from landing before
// a kube-proxy has the rule: a node then forwards the SYN untranslated
// (to the gateway, which answers "network unreachable") and keeps a
// connection-tracking entry for that flow with no DNAT for 120 s (an
// unanswered SYN's timeout), so a later request that happens to reuse the
// source port rides that entry and fails the same way, in the middle of
// whatever event is being counted then.
func webLocal(t *testing.T, c *Cluster) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, LoadBalancerService("web-local", "web", corev1.ServiceExternalTrafficPolicyLocal), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip, err := serviceIngress(c, "web-local")
	if err != nil {
		t.Fatalf("Service web-local got no ingress IP: %v", err)
	}
	var hops []string
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if hops = nexthops(t, c, ip); len(hops) == 2 {
			break
		}
	}
	if len(hops) != 2 {
		t.Fatalf("web-local (Local, a pod on each worker) is forwarded to %v: want both workers", hops)
	}
	var missing []string
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		missing = missing[:0]
		for _, n := range c.Nodes {
			if !proxiedAt(n)[ip] {
				missing = append(missing, n.Name)
			}
		}
		if len(missing) == 0 {
			return ip
		}
	}
	t.Fatalf("web-local's %s: no kube-proxy rule on %v a minute after both workers announced it", ip, missing)
	return ""
}

// drainWorker drains a worker as kubectl drain does (cordon, then evict
// its pods) while web-local (Local, ip) is asked from the client: the
// drained node's route is withdrawn once its pod is gone, and the Service
// answers from the other worker throughout.
func drainWorker(t *testing.T, c *Cluster, node, ip string) {
	t.Helper()
	ctx := context.Background()
	ns := metav1.NamespaceDefault
	url := "http://" + net.JoinHostPort(ip, "80") + "/hostname"
	drained := ""
	for _, n := range c.Nodes {
		if n.Name == node {
			drained = n.IP
		}
	}

	began := time.Now()
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Evicted as kubectl drain does; and again, saying so, a replacement
	// the scheduler placed on the node after the cordon (its watch can lag
	// behind, after kube-apiserver's restart just before).
	evicted := map[string]bool{}
	evict := func() {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || evicted[p.Name] {
				continue
			}
			if len(evicted) > 0 {
				t.Logf("%s drained: %s was placed on it after it was cordoned; evicting it too", node, p.Name)
			}
			evicted[p.Name] = true
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}}
			if err := c.Client.CoreV1().Pods(ns).EvictV1(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("evicting %s: %v", p.Name, err)
			}
		}
	}
	evict()
	failed, total := 0, 0
	withdrawn := time.Duration(0)
	for time.Since(began) < 90*time.Second {
		evict()
		for _, src := range ClientIPs() {
			total++
			if _, err := get(c, src, url); err != nil {
				failed++
			}
		}
		if withdrawn == 0 && !slices.Contains(nexthops(t, c, ip), drained) {
			withdrawn = time.Since(began)
		}
		if withdrawn > 0 && time.Since(began) > withdrawn+5*time.Second {
			break
		}
	}
	if withdrawn == 0 {
		t.Fatalf("%s drained: the routers still forward web-local's %s to it after 90 s (%v)", node, ip, nexthops(t, c, ip))
	}
	if hops := nexthops(t, c, ip); len(hops) != 1 {
		t.Errorf("after draining %s the routers forward web-local's %s to %v: want the other worker only", node, ip, hops)
	}
	for _, src := range ClientIPs() {
		if _, err := get(c, src, url); err != nil {
			t.Errorf("web-local from %s after draining %s: %v", src, node, err)
		}
	}
	t.Logf("%s drained: its route for the Local Service withdrawn after %s; %d of %d client requests failed meanwhile", node, withdrawn.Round(100*time.Millisecond), failed, total)
}

// TestCloudWrongModule installs the chart with a deliberately broken
// load-balancer module (test/e2e/wrongasn: MetalLB objects whose peer ASN
// is off by one), mounted from the host as a user's own module would be:
// the Service still gets its Elastic IP, but no session comes up, no
// router learns a route, and the client's traffic check fails. It shows
// that the check in TestCloudTraffic can fail.
func TestCloudWrongModule(t *testing.T) {
	wasm := os.Getenv("METAL_CCM_CLUSTER_WRONG_MODULE")
	if wasm == "" {
		t.Fatal("METAL_CCM_CLUSTER_WRONG_MODULE unset: run make cluster-test")
	}
	o := cloudOptions(t)
	o.Values = map[string]any{
		"loadBalancer": map[string]any{
			"mode": "module",
			"module": map[string]any{
				"url":       "wasm:///etc/ccm/modules/wrongasn.wasm",
				"namespace": metallbNamespace,
				"rules": []any{map[string]any{
					"apiGroups": []any{"metallb.io"}, "resources": []any{"ipaddresspools", "bgppeers", "bgpadvertisements"},
					"verbs": []any{"get", "list", "watch", "create", "patch", "update", "delete"},
				}},
			},
		},
		"volumes":      []any{map[string]any{"name": "modules", "hostPath": map[string]any{"path": filepath.Dir(wasm)}}},
		"volumeMounts": []any{map[string]any{"name": "modules", "mountPath": "/etc/ccm/modules", "readOnly": true}},
	}
	c := startCloud(t, o)
	ip, _ := clusterWeb(t, c)
	_, err := untilAnswers(c, "http://"+net.JoinHostPort(ip, "80")+"/hostname", 45*time.Second)
	if err == nil {
		t.Fatalf("the client reached %s although the module's BGPPeers name the wrong peer ASN: the traffic check cannot fail", ip)
	}
	for _, r := range c.Routers {
		n4, n6, err := r.Established()
		if err != nil {
			t.Fatal(err)
		}
		if n := n4 + n6; n != 0 {
			t.Errorf("%s has %d sessions up with a wrong peer ASN", r.Name, n)
		}
	}
	if hops := nexthops(t, c, ip); len(hops) != 0 {
		t.Errorf("routers forward %s to %v with a wrong peer ASN", ip, hops)
	}
	out, _ := c.Routers[0].Birdc("show", "protocols", "all", "node1")
	t.Logf("as it should: %v; router 1 on node-1's session: %s", err, linesWith(out, "BGP state", "Last error"))
}

// linesWith are the lines of s that contain one of the words, joined.
func linesWith(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, strings.TrimSpace(l))
				break
			}
		}
	}
	return strings.Join(out, " | ")
}

// sessionResets counts how often the sessions that were up before
// (Cluster.SessionUps) came up again at the routers since, each an error:
// a change of configuration must leave every session up. (A session up
// for the first time is no reset.)
func sessionResets(t *testing.T, c *Cluster, before map[string]int) int {
	t.Helper()
	after, err := c.SessionUps()
	if err != nil {
		t.Fatal(err)
	}
	resets := 0
	for s, ups := range after {
		if d := ups - before[s]; before[s] > 0 && d != 0 {
			resets += d
			t.Errorf("session %s came up %d more times: it was reset", s, d)
		}
	}
	return resets
}
