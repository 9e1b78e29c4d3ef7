//go:build e2e && linux

package e2e

import (
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"

	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// TestMain moves the whole test into a private user and network namespace
// (or fails with one line saying what the machine must allow).
func TestMain(m *testing.M) {
	if !dataplane.InNamespace() {
		os.Exit(dataplane.ReexecInNamespace())
	}
	os.Exit(m.Run())
}

const password = "e2eBgpPass42" // the project's BGP MD5 password, 10-20 letters and digits

var devices = []Device{
	{Name: "cp-0", Metro: "da", ControlPlane: true},
	{Name: "cp-1", Metro: "da", ControlPlane: true}, // an EIP moves only within its metro
	{Name: "worker-0", Metro: "da"},
	{Name: "worker-1", Metro: "da"},
	{Name: "worker-2", Metro: "sv"},
	{Name: "worker-3", Metro: "sv", Later: true},
}

// timings are the figures printed at the end of the run.
type timings struct {
	created, deleted, joined, left, reselected, failover []time.Duration
}

func TestDataPlane(t *testing.T) {
	bins := binaries(t)
	ctx := context.Background()
	began := time.Now()
	dir := t.TempDir()
	policyDir := filepath.Join(dir, "policies")
	mount, err := NewPolicyMount(policyDir, "../../policies")
	if err != nil {
		t.Fatal(err)
	}
	must(t, mount.Update(nil)) // the default policies, as a ConfigMap mounts them

	h := start(t, WorldOptions{
		Dir: dir, Bins: bins, Devices: devices, LoadBalancer: "metallb:///" + dataplane.MetalLBNamespace,
		PolicyDir: policyDir, Password: password, Logf: t.Logf, ControlPlaneEIPTag: "e2e-control-plane",
		CloudConfig: map[string]any{"cacheRefreshPeriod": "10m"},
	})
	c := h.c
	t.Logf("cluster up in %s: %d routers, %d speakers", time.Since(began).Round(time.Millisecond), len(c.Routers), len(c.Speakers))
	var tm timings

	allNodes := []string{"cp-0", "cp-1", "worker-0", "worker-1", "worker-2"}
	workers := []string{"worker-0", "worker-1", "worker-2"}

	// 1. Services in both metros: every EIP at both routers, one path per
	// BGP node of the EIP's metro (an Elastic IP is routed only in its
	// metro: the module restricts the announcement, the routers refuse
	// it from elsewhere), AS path = the project's ASN. Measured one by one.
	var ips []string
	metroOf := map[string]string{} // EIP -> metro
	for i := 0; i < 20; i++ {
		metro := []string{"da", "sv"}[i%2]
		name := fmt.Sprintf("svc-%02d-%s", i, metro)
		created := time.Now()
		h.addService(name, map[string]string{"metal.equinix.com/eip-metro": metro})
		ip := h.serviceIP(name)
		h.wantRoute(ip, h.ipsIn(metro, allNodes...), "Service "+name)
		tm.created = append(tm.created, time.Since(created))
		h.wantReservationMetro(name, metro)
		ips = append(ips, ip)
		metroOf[ip] = metro
	}
	// Every earlier route still has all its paths.
	for _, ip := range ips {
		h.wantRoute(ip, h.ipsIn(metroOf[ip], allNodes...), "earlier Service "+ip)
	}

	// 4. The password: the routers require it, and every node's session is
	// up at both.
	h.wantSessions(allNodes)

	// 2. Deleting Services withdraws exactly their routes.
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("svc-%02d-%s", i, []string{"da", "sv"}[i%2])
		deleted := time.Now()
		if err := c.Kube.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		h.wantRoute(ips[i], nil, "deleted Service "+name)
		tm.deleted = append(tm.deleted, time.Since(deleted))
	}
	ips = ips[10:]
	for _, ip := range ips {
		h.wantRoute(ip, h.ipsIn(metroOf[ip], allNodes...), "remaining Service "+ip)
	}

	// 3. Swapping the BGP selection policy while running, as a ConfigMap
	// update does: the control-plane node's next hops, peers and
	// annotations go; swapping back (a plain file replace) restores them.
	swapped := time.Now()
	must(t, mount.Update(map[string]string{"bgp.rego": readFile(t, "../../examples/policies/bgp-no-control-plane/bgp.rego")}))
	h.wantMetroRoutes(ips, metroOf, workers, "after the no-control-plane policy")
	tm.reselected = append(tm.reselected, time.Since(swapped))
	h.wantBGPNodes(workers)
	swapped = time.Now()
	must(t, mount.ReplaceFile("bgp.rego", readFile(t, "../../policies/bgp.rego")))
	h.wantMetroRoutes(ips, metroOf, allNodes, "after the default policy came back")
	tm.reselected = append(tm.reselected, time.Since(swapped))
	h.wantBGPNodes(allNodes)

	// A placement policy swap applies to the next Service: with the
	// default placement a Service without a location is refused; with
	// eip-majority-metro it goes where most BGP nodes are (da).
	must(t, mount.Update(map[string]string{"eip.rego": readFile(t, "../../examples/policies/eip-majority-metro/eip.rego")}))
	h.eventually("the placement policy reloaded", 30*time.Second, func() (bool, string) {
		log, _ := os.ReadFile(c.CCM.Log)
		n := strings.Count(string(log), "Policies reloaded")
		return n >= 3, fmt.Sprintf("%d reloads logged", n)
	})
	h.addService("anywhere", nil)
	ip := h.serviceIP("anywhere")
	h.wantRoute(ip, h.ipsIn("da", allNodes...), "Service placed by the swapped policy")
	h.wantReservationMetro("anywhere", "da")
	ips = append(ips, ip)
	metroOf[ip] = "da"

	// A node joining adds a next hop to its metro's EIPs; a node leaving
	// removes it.
	joined := time.Now()
	if err := c.JoinNode(ctx, "worker-3"); err != nil {
		t.Fatal(err)
	}
	withJoiner := append(append([]string{}, allNodes...), "worker-3")
	h.wantMetroRoutes(ips, metroOf, withJoiner, "after worker-3 joined")
	tm.joined = append(tm.joined, time.Since(joined))
	left := time.Now()
	if err := c.RemoveNode(ctx, "worker-2"); err != nil {
		t.Fatal(err)
	}
	h.wantMetroRoutes(ips, metroOf, []string{"cp-0", "cp-1", "worker-0", "worker-1", "worker-3"}, "after worker-2 left")
	tm.left = append(tm.left, time.Since(left))

	// 6. The control-plane EIP: its holder's kube-apiserver stops
	// answering; the CCM moves the EIP to the healthy control-plane node,
	// and the external Service keeps the EIP and its EndpointSlice.
	h.wantControlPlaneService(false)
	if got := c.ControlPlaneHolder(); got != "cp-0" {
		t.Fatalf("the control-plane EIP is on %q before the failover, want cp-0 (seeded)", got)
	}
	failed := time.Now()
	must(t, c.Health.Stop("cp-0"))
	h.eventually("the control-plane EIP moves to cp-1", 90*time.Second, func() (bool, string) {
		got := c.ControlPlaneHolder()
		return got == "cp-1", "held by " + got
	})
	tm.failover = append(tm.failover, time.Since(failed))
	h.wantControlPlaneService(true)

	for name, p := range c.Speakers {
		if done, err := p.Exited(); done {
			t.Errorf("speaker %s exited: %v (log %s)", name, err, p.Log)
		}
	}
	printTimings(t, tm, time.Since(began))
}

// e2e holds the helpers of one run.
type e2e struct {
	t   *testing.T
	c   *World
	ctx context.Context
}

func (h *e2e) ips(nodes ...string) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, h.c.NodeIP[n])
	}
	return out
}

// addService creates a LoadBalancer Service and its EndpointSlice with one
// ready endpoint, as kube-controller-manager would for a running Pod.
func (h *e2e) addService(name string, annotations map[string]string) {
	h.t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	if _, err := h.c.Kube.CoreV1().Services("default").Create(h.ctx, svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.addEndpointSlice(name, name+"-e2e", discoveryv1.AddressTypeIPv4, "10.244.0.10")
	node, port, proto, portName := "worker-0", int32(80), v1.ProtocolTCP, "http"
	// The Endpoints too, which kube-controller-manager still writes and
	// MetalLB 0.12 reads.
	ep := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Subsets: []v1.EndpointSubset{{
			Addresses: []v1.EndpointAddress{{IP: "10.244.0.10", NodeName: &node}},
			Ports:     []v1.EndpointPort{{Name: portName, Port: port, Protocol: proto}},
		}},
	}
	if _, err := h.c.Kube.CoreV1().Endpoints("default").Create(h.ctx, ep, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// addEndpointSlice creates the Service's EndpointSlice of one address
// family, with one ready endpoint (addr) on worker-0, port 80, as
// kube-controller-manager would for a running Pod.
func (h *e2e) addEndpointSlice(svc, name string, typ discoveryv1.AddressType, addr string) {
	h.t.Helper()
	ready, node, port, proto, portName := true, "worker-0", int32(80), v1.ProtocolTCP, "http"
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: typ,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	if _, err := h.c.Kube.DiscoveryV1().EndpointSlices("default").Create(h.ctx, es, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *e2e) serviceIP(name string) string {
	h.t.Helper()
	var ip string
	h.eventually("Service "+name+" gets its Elastic IP", 60*time.Second, func() (bool, string) {
		s, err := h.c.Kube.CoreV1().Services("default").Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		// The CCM's choice (spec.loadBalancerIP), once the status shows it:
		// MetalLB may first assign an address of a user's own pool.
		ip = s.Spec.LoadBalancerIP
		ok := ip != "" && len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].IP == ip
		return ok, fmt.Sprintf("status %+v, spec.loadBalancerIP %q", s.Status.LoadBalancer, s.Spec.LoadBalancerIP)
	})
	return ip
}

func (h *e2e) wantRoute(ip string, nextHops []string, what string) {
	h.t.Helper()
	if _, err := h.c.WaitRoute(h.ctx, ip+"/32", nextHops, dataplane.ProjectASN, 60*time.Second); err != nil {
		h.t.Fatalf("%s: routers: %v", what, err)
	}
}

// wantMetroRoutes: each of ips at both routers with one path per node of
// nodes in the EIP's metro (metroOf), and none from elsewhere.
func (h *e2e) wantMetroRoutes(ips []string, metroOf map[string]string, nodes []string, what string) {
	h.t.Helper()
	for _, ip := range ips {
		h.wantRoute(ip, h.ipsIn(metroOf[ip], nodes...), what)
	}
}

// ipsIn are the addresses of those of nodes that are in metro.
func (h *e2e) ipsIn(metro string, nodes ...string) []string {
	var in []string
	for _, n := range nodes {
		for _, d := range h.c.Opts.Devices {
			if d.Name == n && d.Metro == metro {
				in = append(in, n)
			}
		}
	}
	return h.ips(in...)
}

func (h *e2e) wantReservationMetro(svc, metro string) {
	h.t.Helper()
	s, err := h.c.Kube.CoreV1().Services("default").Get(h.ctx, svc, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range h.c.Emu.Reservations(emulator.DefaultProjectID) {
		if r.Prefix.Addr().String() == s.Spec.LoadBalancerIP {
			if r.Metro != metro {
				h.t.Fatalf("Service %s: Elastic IP %s in metro %s, want %s", svc, r.Prefix, r.Metro, metro)
			}
			return
		}
	}
	h.t.Fatalf("Service %s: no reservation holds %q", svc, s.Spec.LoadBalancerIP)
}

// wantSessions: every router has an established session with exactly these
// nodes.
func (h *e2e) wantSessions(nodes []string) {
	h.t.Helper()
	h.wantSessionsFrom(h.ips(nodes...))
}

// wantSessionsFrom: every router has an established session with exactly
// these addresses.
func (h *e2e) wantSessionsFrom(want []string) {
	h.t.Helper()
	want = append([]string{}, want...)
	sort.Strings(want)
	for _, r := range h.c.Routers {
		h.eventually("sessions at "+r.Name, 60*time.Second, func() (bool, string) {
			up, err := r.Established(h.ctx)
			if err != nil {
				return false, err.Error()
			}
			return fmt.Sprint(up) == fmt.Sprint(want), fmt.Sprintf("established %v, want %v", up, want)
		})
	}
}

// wantBGPNodes: the CCM's annotations and MetalLB peers name exactly these
// nodes, and the routers' sessions match.
func (h *e2e) wantBGPNodes(nodes []string) {
	h.t.Helper()
	sort.Strings(nodes)
	h.eventually("BGP annotations and peers", 60*time.Second, func() (bool, string) {
		got, peers, err := h.c.BGPObjects(h.ctx)
		if err != nil {
			return false, err.Error()
		}
		ok := fmt.Sprint(got) == fmt.Sprint(nodes) && fmt.Sprint(peers) == fmt.Sprint(nodes)
		return ok, fmt.Sprintf("annotated %v, MetalLB peers for %v; want %v", got, peers, nodes)
	})
	h.wantSessions(nodes)
}

// wantControlPlaneService: the external Service carries the control-plane
// EIP in spec and status, its EndpointSlice mirrors default/kubernetes, and
// the status survives MetalLB: it stays for several seconds with MetalLB's
// controller running, and MetalLB records nothing about the Service. (The
// names are upstream's, kept by this CCM.) The survival is watched when
// survives is set: once in a run is enough, after the failover rewrote it.
func (h *e2e) wantControlPlaneService(survives bool) {
	h.t.Helper()
	const ns, name = "kube-system", "cloud-provider-equinix-metal-kubernetes-external"
	r, _ := h.c.Emu.Reservation(h.c.ControlPlaneEIP)
	eip := r.Prefix.Addr().String()
	carries := func() (bool, string) {
		s, err := h.c.Kube.CoreV1().Services(ns).Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		// MetalLB's controller cleared the status of a Service without
		// the CCM's loadBalancerClass (the EIP is in none of its pools),
		// and kube-proxy routes the EIP by that status.
		if s.Spec.LoadBalancerIP != eip || len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].IP != eip {
			return false, fmt.Sprintf("spec.loadBalancerIP %q, status %+v; want %s in both", s.Spec.LoadBalancerIP, s.Status.LoadBalancer, eip)
		}
		slices, err := h.c.Kube.DiscoveryV1().EndpointSlices(ns).List(h.ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		if len(slices.Items) == 0 || len(slices.Items[0].Endpoints) == 0 {
			return false, "no EndpointSlice with endpoints for the external Service"
		}
		return true, ""
	}
	h.eventually("the external Service carries the control-plane EIP", 60*time.Second, carries)
	if !survives {
		return
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ok, msg := carries(); !ok {
			h.t.Fatalf("the external Service lost the control-plane EIP with MetalLB running: %s", msg)
		}
	}
	evs, err := h.c.Kube.CoreV1().Events(ns).List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Source.Component, "metallb") || strings.Contains(e.ReportingController, "metallb") {
			h.t.Errorf("MetalLB acted on the external Service: %s %s", e.Reason, e.Message)
		}
	}
}

func (h *e2e) eventually(what string, timeout time.Duration, cond func() (bool, string)) {
	h.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(h.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		h.t.Fatalf("%s: never happened in %s; last seen: %s", what, timeout, last)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// keepLogs copies nothing: it names where the logs are, which t.TempDir
// would remove, so they are moved to a kept directory first.
// binaries are the MetalLB and GoBGP builds make e2e passes in.
func binaries(t *testing.T) dataplane.Binaries {
	t.Helper()
	bins, err := dataplane.BinariesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return bins
}

// start brings up one test's World and stops it when the test ends,
// keeping its logs when the test failed.
func start(t *testing.T, opts WorldOptions) *e2e {
	t.Helper()
	ctx := context.Background()
	c, err := StartWorld(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			keepLogs(t, opts.Dir)
		}
		c.Stop()
	})
	return &e2e{t: t, c: c, ctx: ctx}
}

func keepLogs(t *testing.T, dir string) {
	kept, err := os.MkdirTemp("", "ccm-e2e-logs-")
	if err != nil {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	// FRR's reloads per node (frr-<node>/), as the reloader wrote them
	// (passwords blanked); frr.conf itself holds the password.
	reloads, _ := filepath.Glob(filepath.Join(dir, "frr-*", "frr-reload.*"))
	for _, l := range append(logs, reloads...) {
		b, _ := os.ReadFile(l)
		name := filepath.Base(l)
		if node := filepath.Base(filepath.Dir(l)); node != filepath.Base(dir) {
			name = node + "-" + name
		}
		_ = os.WriteFile(filepath.Join(kept, name), b, 0o644)
	}
	t.Logf("logs of the CCM, MetalLB and the routers kept in %s", kept)
}

func printTimings(t *testing.T, tm timings, total time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "\ndata-plane timings (a measurement, not an assertion):\n")
	line := func(what string, ds []time.Duration) {
		if len(ds) == 0 {
			return
		}
		s := append([]time.Duration{}, ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		p := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
		fmt.Fprintf(&b, "  %-44s n=%-2d p50 %-8s p99 %-8s max %s\n", what, len(s), p(0.50).Round(time.Millisecond), p(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
	}
	line("Service created -> /32 at both routers", tm.created)
	line("Service deleted -> withdrawn at both", tm.deleted)
	line("BGP policy swapped -> next hops follow", tm.reselected)
	line("node joined -> its next hop on every EIP", tm.joined)
	line("node deleted -> its next hop gone", tm.left)
	line("control-plane /healthz down -> EIP moved", tm.failover)
	fmt.Fprintf(&b, "  whole run (processes started to finish): %s\n", total.Round(time.Millisecond))
	fmt.Print(b.String())
}

// TestWrongPeerASNFailsAtRouters shows that the router assertion can fail:
// the CCM runs a test-only module (wrongasn) that writes every BGPPeer with
// the peer ASN off by one. The objects exist and look plausible; the
// sessions never come up, so the routers hold nothing, and the very check
// TestDataPlane relies on reports it.
func TestWrongPeerASNFailsAtRouters(t *testing.T) {
	t.Parallel() // alongside TestSandboxDataPlane, whose namespace is its own
	bins := binaries(t)
	module := os.Getenv(dataplane.EnvWrongASNModule)
	if _, err := os.Stat(module); err != nil {
		t.Fatalf("%s=%q: %v; run make e2e, which builds it", dataplane.EnvWrongASNModule, module, err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	h := start(t, WorldOptions{
		Dir: dir, Bins: bins, Devices: []Device{{Name: "worker-0", Metro: "da"}, {Name: "worker-1", Metro: "da"}},
		LoadBalancer: "wasm://" + module + "?namespace=" + dataplane.MetalLBNamespace, Password: password, Logf: t.Logf,
	})
	c := h.c
	h.addService("broken", map[string]string{"metal.equinix.com/eip-metro": "da"})
	ip := h.serviceIP("broken")
	h.eventually("the broken module's BGPPeers", 60*time.Second, func() (bool, string) {
		peers, err := c.Dyn.Resource(bgpPeersGVR).Namespace(dataplane.MetalLBNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var asns []int64
		for _, p := range peers.Items {
			asn, _, _ := unstructured.NestedInt64(p.Object, "spec", "peerASN")
			asns = append(asns, asn)
		}
		return len(asns) == 4 && asns[0] == dataplane.RouterASN+1, fmt.Sprintf("peer ASNs %v", asns)
	})

	_, err := c.WaitRoute(ctx, ip+"/32", h.ips("worker-0", "worker-1"), dataplane.ProjectASN, 20*time.Second)
	if err == nil {
		t.Fatal("the router assertion passed although every BGPPeer has a wrong peer ASN: it cannot catch a broken data plane")
	}
	if !strings.Contains(err.Error(), "via []") {
		t.Fatalf("the router assertion failed, but not because the routers hold nothing: %v", err)
	}
	t.Logf("as it must, the router assertion failed: %v", err)
	for _, r := range c.Routers {
		if up, err := r.Established(ctx); err != nil || len(up) != 0 {
			t.Errorf("%s: established sessions %v (%v); want none with a wrong peer ASN", r.Name, up, err)
		}
	}
}

// TestKubeVIPStyle: in kube-vip mode the CCM writes no MetalLB objects,
// only the BGP node annotations kube-vip reads. A kube-vip-style speaker per
// node, configured from those annotations alone (StartAnnotationSpeaker),
// must bring up password-protected sessions with both routers and get the
// Service's Elastic IP to them with one path per node.
func TestKubeVIPStyle(t *testing.T) {
	bins := binaries(t)
	ctx := context.Background()
	dir := t.TempDir()
	nodes := []string{"worker-0", "worker-1"}
	h := start(t, WorldOptions{
		Dir: dir, Bins: bins, Devices: []Device{{Name: nodes[0], Metro: "da"}, {Name: nodes[1], Metro: "da"}},
		LoadBalancer: "kube-vip://", Password: password, Logf: t.Logf, NoMetalLB: true,
	})
	c := h.c
	h.addService("vip", map[string]string{"metal.equinix.com/eip-metro": "da"})
	ip := h.serviceIP("vip")
	for i, name := range nodes {
		var node *v1.Node
		h.eventually("BGP annotations on "+name, 60*time.Second, func() (bool, string) {
			n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			node = n
			return n.Annotations["metal.equinix.com/bgp-peers-1-peer-ip"] != "", fmt.Sprintf("annotations %v", n.Annotations)
		})
		if i == 0 {
			noMultihopFails(t, h, bins, dir, node)
		}
		sp, err := StartAnnotationSpeaker(bins, dir, node, dataplane.APIPortBase+10+i)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Stop()
		if err := sp.Announce(ctx, ip+"/32"); err != nil {
			t.Fatal(err)
		}
	}
	h.wantRoute(ip, h.ips(nodes...), "kube-vip-style announcement")
	h.wantSessions(nodes)
}

// noMultihopFails is the test that the gateway can fail a speaker: the
// same kube-vip-style speaker for node, with the peer-multi-hop
// annotations the CCM wrote (one per peer, required) left out, dials eBGP
// at TTL 1, which the gateway in front of the routers drops, and brings up
// no session in 20 s (GoBGP dials within its 5 to 10 s connect retry).
func noMultihopFails(t *testing.T, h *e2e, bins dataplane.Binaries, dir string, node *v1.Node) {
	t.Helper()
	bare := node.DeepCopy()
	var dropped int
	for k, v := range bare.Annotations {
		if strings.HasSuffix(k, "-peer-multi-hop") {
			if v != "true" {
				t.Errorf("node %s: %s = %q, want \"true\" (the emulator's neighbours are multihop)", node.Name, k, v)
			}
			delete(bare.Annotations, k)
			dropped++
		}
	}
	if dropped != len(dataplane.RouterAddrs) {
		t.Fatalf("node %s has %d peer-multi-hop annotations, want one per peer (%d)", node.Name, dropped, len(dataplane.RouterAddrs))
	}
	sp, err := StartAnnotationSpeaker(bins, dir, bare, dataplane.APIPortBase+20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	time.Sleep(20 * time.Second)
	for _, r := range h.c.Routers {
		up, err := r.Established(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(up, h.c.NodeIP[node.Name]) {
			t.Errorf("%s: a session with %s without multihop came up through the gateway; a TTL-1 session must not", r.Name, node.Name)
		}
	}
	t.Logf("without peer-multi-hop, %s's speaker brought up no session through the gateway in 20s", node.Name)
}

// TestLegacyConfigMap: the legacy MetalLB ConfigMap mode, with MetalLB
// 0.12.1 (the last that reads it) as controller and speakers. The
// ConfigMap has one pool per Service, keeps the user's own pool, and one
// peer per node and router with the ASNs, source address and password;
// and the Service's EIP reaches both routers from the node of its metro
// (the other's announcement, which MetalLB 0.12 cannot hold back, is
// refused by the routers).
func TestLegacyConfigMap(t *testing.T) {
	bins := binaries(t)
	ctx := context.Background()
	dir := t.TempDir()
	nodes := []string{"worker-0", "worker-1"}
	h := start(t, WorldOptions{
		Dir: dir, Bins: bins, Devices: []Device{{Name: nodes[0], Metro: "da"}, {Name: nodes[1], Metro: "sv"}},
		LoadBalancer: "metallb:///" + dataplane.MetalLBNamespace + "/config", Password: password, Logf: t.Logf, LegacyConfigMap: "config",
	})
	c := h.c
	userPool := "address-pools:\n- name: users-own-pool\n  protocol: bgp\n  addresses:\n  - 192.0.2.0/28\n"
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: dataplane.MetalLBNamespace, Name: "config"}, Data: map[string]string{"config": userPool}}
	if _, err := c.Kube.CoreV1().ConfigMaps(dataplane.MetalLBNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.addService("legacy", map[string]string{"metal.equinix.com/eip-metro": "da"})
	ip := h.serviceIP("legacy")

	type peer struct {
		MyASN    uint32 `json:"my-asn"`
		PeerASN  uint32 `json:"peer-asn"`
		PeerAddr string `json:"peer-address"`
		Source   string `json:"source-address"`
		Password string `json:"password"`
		Selector []struct {
			MatchLabels map[string]string `json:"match-labels"`
		} `json:"node-selectors"`
	}
	var legacy struct {
		Pools []struct {
			Name      string   `json:"name"`
			Protocol  string   `json:"protocol"`
			Addresses []string `json:"addresses"`
		} `json:"address-pools"`
		Peers []peer `json:"peers"`
	}
	h.eventually("the legacy ConfigMap holds the Service's pool and every node's peers", 60*time.Second, func() (bool, string) {
		got, err := c.Kube.CoreV1().ConfigMaps(dataplane.MetalLBNamespace).Get(ctx, "config", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		legacy.Pools, legacy.Peers = nil, nil
		if err := yaml.Unmarshal([]byte(got.Data["config"]), &legacy); err != nil {
			return false, err.Error()
		}
		pools := map[string]string{}
		for _, p := range legacy.Pools {
			pools[p.Name] = p.Protocol + " " + strings.Join(p.Addresses, ",")
		}
		if pools["users-own-pool"] != "bgp 192.0.2.0/28" || pools["default/legacy"] != "bgp "+ip+"/32" {
			return false, fmt.Sprintf("pools %v", pools)
		}
		return len(legacy.Peers) == 4, fmt.Sprintf("%d peers", len(legacy.Peers))
	})
	want := map[string]bool{}
	for _, n := range nodes {
		for _, r := range dataplane.RouterAddrs {
			want[n+" "+r] = true
		}
	}
	for _, p := range legacy.Peers {
		var host string
		for _, s := range p.Selector {
			if hn := s.MatchLabels[v1.LabelHostname]; hn != "" {
				host = hn
			}
		}
		key := host + " " + p.PeerAddr
		if !want[key] {
			t.Errorf("unexpected or duplicate peer %s", key)
		}
		delete(want, key)
		if p.MyASN != dataplane.ProjectASN || p.PeerASN != dataplane.RouterASN || p.Source != c.NodeIP[host] || p.Password != password {
			t.Errorf("peer %s: my-asn %d peer-asn %d source %s, password set %v; want %d, %d, %s and the project's password",
				key, p.MyASN, p.PeerASN, p.Source, p.Password != "", dataplane.ProjectASN, dataplane.RouterASN, c.NodeIP[host])
		}
	}
	if len(want) > 0 {
		t.Errorf("missing peers: %v", want)
	}
	// MetalLB 0.12 cannot restrict a pool to some nodes: worker-1 (sv)
	// announces the da Elastic IP too, and the routers refuse it there,
	// as Equinix's do.
	h.wantRoute(ip, h.ips(nodes[0]), "legacy ConfigMap mode")
	h.wantSessions(nodes)
}
