//go:build cluster && linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// dualStackOptions: a cloud cluster with IPv6, its MetalLB the one that
// runs in FRR mode (make cluster-test passes it and Debian's FRR).
func dualStackOptions(t *testing.T) *CloudOptions {
	t.Helper()
	o := cloudOptions(t)
	o.MetalLBManifest = os.Getenv("METAL_CCM_CLUSTER_METALLB_FRR_MANIFEST")
	o.MetalLBBins = os.Getenv("METAL_CCM_CLUSTER_METALLB_FRR_BINS")
	o.FRR = os.Getenv("METAL_CCM_CLUSTER_FRR")
	if o.MetalLBManifest == "" || o.MetalLBBins == "" || o.FRR == "" {
		t.Fatal("METAL_CCM_CLUSTER_{METALLB_FRR_MANIFEST,METALLB_FRR_BINS,FRR} unset: run make cluster-test")
	}
	o.DualStack = true
	return o
}

// TestCloudDualStack is a packet through an IPv6 Elastic IP: a dual-stack
// cluster (pods, Services, kube-proxy and the nodes' links in both
// families) whose MetalLB speakers run in FRR mode, each driving a bgpd on
// its node. A RequireDualStack Service gets an IPv4 and an IPv6 Elastic
// IP; every node announces each over its own family's sessions, both
// routers install both with one path per node, and the client behind
// them gets answers from both pods on both addresses, over TCP and UDP.
// A PreferDualStack Service gets both too, and deleting the first
// withdraws its two routes while the second keeps answering.
func TestCloudDualStack(t *testing.T) {
	c := startCloud(t, dualStackOptions(t))
	ctx := context.Background()
	ns := metav1.NamespaceDefault
	ip4, ip6 := dualStackWeb(t, c)
	t.Logf("Service web: Elastic IPs %s and %s", ip4, ip6)

	var want4, want6 []string
	for _, n := range c.Nodes {
		want4, want6 = append(want4, n.IP), append(want6, n.IPv6)
	}
	slices.Sort(want4)
	slices.Sort(want6)
	for _, tc := range []struct {
		ip    string
		nodes []string
	}{{ip4, want4}, {ip6, want6}} {
		url := "http://" + net.JoinHostPort(tc.ip, "80")
		took, err := untilAnswers(c, url+"/hostname", 2*time.Minute)
		if err != nil {
			n4, n6, _ := c.Routers[0].Established()
			t.Fatalf("%v; routers' next hops for %s: %v; %s has %d IPv4 and %d IPv6 sessions up", err, tc.ip, nexthops(t, c, tc.ip), c.Routers[0].Name, n4, n6)
		}
		t.Logf("%s answered the client after %s more", tc.ip, took.Round(time.Millisecond))
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitSessions(sctx, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ip    string
		nodes []string
	}{{ip4, want4}, {ip6, want6}} {
		var hops []string
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
			if hops = nexthops(t, c, tc.ip); slices.Equal(hops, tc.nodes) {
				break
			}
		}
		if !slices.Equal(hops, tc.nodes) {
			t.Errorf("routers forward %s to %v: want every node's address of its family %v (ECMP)", tc.ip, hops, tc.nodes)
		}
	}

	// 16 client addresses of each family: both pods answer on both
	// Elastic IPs.
	for _, tc := range []struct {
		ip      string
		clients []string
	}{{ip4, ClientIPs()}, {ip6, ClientIPs6()}} {
		url := "http://" + net.JoinHostPort(tc.ip, "80")
		pods := map[string]int{}
		for _, src := range tc.clients {
			name, err := get(c, src, url+"/hostname")
			if err != nil {
				t.Errorf("from %s: %v", src, err)
				continue
			}
			pods[name]++
		}
		if len(pods) != 2 {
			t.Errorf("answers through %s came from pods %v: want both", tc.ip, pods)
		}
		got, err := c.UDPExchange(tc.clients[0], net.JoinHostPort(tc.ip, "90"), "hostname", 3*time.Second)
		if err != nil || pods[got] == 0 {
			t.Errorf("UDP hostname through %s:90 = %q, %v: want one of the pods %v", tc.ip, got, err, pods)
		}
		t.Logf("%d client addresses through %s: pods %v; UDP answered by %s", len(tc.clients), tc.ip, pods, got)
	}

	// A PreferDualStack Service of the same pods gets both families too.
	// Deleting web then withdraws its two routes while the sessions stay
	// up for prefer's. (Deleting the last Service takes the nodes' BGP
	// peers away: bgpd closes its sessions, and BIRD, a graceful-restart
	// helper by default, keeps the routes as stale for FRR's restart time,
	// 120 s: not what this test is about.)
	prefer := LoadBalancerService("prefer", "web", corev1.ServiceExternalTrafficPolicyCluster)
	pds := corev1.IPFamilyPolicyPreferDualStack
	prefer.Spec.IPFamilyPolicy = &pds
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, prefer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p4, p6 := dualIngress(t, c, "prefer")
	for _, ip := range []string{p4, p6} {
		if _, err := untilAnswers(c, "http://"+net.JoinHostPort(ip, "80")+"/hostname", time.Minute); err != nil {
			t.Errorf("PreferDualStack Service prefer: %v", err)
		}
	}
	if err := c.Client.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{ip4, ip6} {
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			return len(nexthops(t, c, ip)) == 0, nil
		})
		if err != nil {
			t.Errorf("routers still forward %s to %v a minute after the Service was deleted", ip, nexthops(t, c, ip))
		}
	}
	for _, ip := range []string{p4, p6} {
		if _, err := get(c, "", "http://"+net.JoinHostPort(ip, "80")+"/hostname"); err != nil {
			t.Errorf("prefer's %s after web was deleted: %v", ip, err)
		}
	}
	t.Logf("PreferDualStack Service prefer: %s and %s answered before and after web was deleted", p4, p6)
	serviceChurnKeepsSessions(t, c, 10)
}

// serviceChurnKeepsSessions creates n Services one after the other, each
// until it has its Elastic IP and route, then deletes them, 2n changes
// that each rewrite MetalLB's configuration, and counts the sessions the
// routers saw reset meanwhile: none may be. (A reload that only adds or
// removes a prefix must leave every session up: with FRR 8.4.4's
// frr-reload.py, MetalLB's multihop peers were reset at every one.)
func serviceChurnKeepsSessions(t *testing.T, c *Cluster, n int) {
	t.Helper()
	ctx := context.Background()
	ns := metav1.NamespaceDefault
	before, err := c.SessionUps()
	if err != nil {
		t.Fatal(err)
	}
	reloads := c.FRRReloads()
	var ips []string
	for i := range n {
		name := fmt.Sprintf("churn-%d", i)
		if _, err := c.Client.CoreV1().Services(ns).Create(ctx, LoadBalancerService(name, "web", corev1.ServiceExternalTrafficPolicyCluster), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ip, err := serviceIngress(c, name)
		if err != nil {
			t.Fatalf("Service %s: %v", name, err)
		}
		untilRoute(t, c, ip, true)
		ips = append(ips, ip)
	}
	for i := range n {
		if err := c.Client.CoreV1().Services(ns).Delete(ctx, fmt.Sprintf("churn-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		untilRoute(t, c, ips[i], false)
	}
	resets := sessionResets(t, c, before)
	t.Logf("%d Service changes, %d FRR reloads: %d session resets over %d sessions at the routers", 2*n, c.FRRReloads()-reloads, resets, len(before))
}

// untilRoute waits until router 1 forwards ip to some node (or, with
// present false, to none).
func untilRoute(t *testing.T, c *Cluster, ip string, present bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		hops, err := c.Routers[0].Nexthops(ip)
		return err == nil && (len(hops) > 0) == present, nil
	})
	if err != nil {
		hops, _ := c.Routers[0].Nexthops(ip)
		t.Fatalf("%s forwards %s to %v a minute on; want a route: %v", c.Routers[0].Name, ip, hops, present)
	}
}

// TestCloudNoMultihop shows the gateway network can fail a session: the
// emulator says no neighbour is multihop (Equinix says every one is), so
// the CCM tells no speaker its peers are behind the gateway, and a speaker
// that keeps eBGP at TTL 1 unless told multihop loses the session at the
// gateway in front of the peers. The Service gets its Elastic IPs, but no
// session comes up, no router learns a route, and the client cannot reach
// it. TestCloudDualStack and TestCloudSpeakers/kube-vip, the same
// clusters with Equinix's multihop, have every session up. (MetalLB's
// native speaker dials at the system's TTL and needs no multihop.)
func TestCloudNoMultihop(t *testing.T) {
	t.Run("metallb-frr", func(t *testing.T) {
		// MetalLB's FRR: the BGPPeers carry no ebgpMultiHop.
		o := dualStackOptions(t)
		o.NoMultihop = true
		c := startCloud(t, o)
		ip4, ip6 := dualStackWeb(t, c)
		noSessions(t, c, ip4, ip6)
		if c.FRRReloads() == 0 {
			t.Error("no speaker's FRR configuration was applied: the test shows nothing about multihop")
		}
	})
	t.Run("kube-vip-told-no-multihop", func(t *testing.T) {
		// kube-vip's GoBGP: peer-multi-hop "false" on every node.
		o := cloudOptions(t)
		o.KubeVIP = needEnv(t, "METAL_CCM_CLUSTER_KUBE_VIP")
		o.NoMultihop = true
		c := startCloud(t, o)
		ctx := context.Background()
		ip, _ := clusterWeb(t, c)
		noSessions(t, c, ip)
		for _, n := range c.Nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v := node.Annotations["metal.equinix.com/bgp-peers-0-peer-multi-hop"]; v != "false" {
				t.Errorf("%s: peer-multi-hop %q: want \"false\", or the test shows nothing about multihop", n.Name, v)
			}
		}
	})
}

// noSessions: the client cannot reach the addresses, the routers have no
// route for them and no session up.
func noSessions(t *testing.T, c *Cluster, ips ...string) {
	t.Helper()
	for _, ip := range ips {
		if _, err := untilAnswers(c, "http://"+net.JoinHostPort(ip, "80")+"/hostname", 45*time.Second); err == nil {
			t.Fatalf("the client reached %s although no speaker was told its peers are multihop: the gateway network lets a TTL-1 session through", ip)
		}
		if hops := nexthops(t, c, ip); len(hops) != 0 {
			t.Errorf("routers forward %s to %v without multihop sessions", ip, hops)
		}
	}
	for _, r := range c.Routers {
		n4, n6, err := r.Established()
		if err != nil {
			t.Fatal(err)
		}
		if n4+n6 != 0 {
			t.Errorf("%s has %d IPv4 and %d IPv6 sessions up without multihop", r.Name, n4, n6)
		}
	}
	out, _ := c.Routers[1].Birdc("show", "protocols", "all", "node1")
	t.Logf("as it should: no session; %s on node-1's: %s", c.Routers[1].Name, linesWith(out, "BGP state", "Last error"))
}

// dualStackWeb runs two agnhost pods behind the RequireDualStack Service
// web and returns its IPv4 and IPv6 Elastic IPs.
func dualStackWeb(t *testing.T, c *Cluster) (ip4, ip6 string) {
	t.Helper()
	webPods(t, c)
	return dualStackService(t, c, "web")
}

// dualStackService creates the RequireDualStack Service name of the web
// pods and returns its IPv4 and IPv6 Elastic IPs.
func dualStackService(t *testing.T, c *Cluster, name string) (ip4, ip6 string) {
	t.Helper()
	ctx, ns := context.Background(), metav1.NamespaceDefault
	svc := LoadBalancerService(name, "web", corev1.ServiceExternalTrafficPolicyCluster)
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc.Spec.IPFamilyPolicy = &policy
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dualIngress(t, c, name)
}

// dualIngress waits for the Service's IPv4 and IPv6 ingress addresses.
func dualIngress(t *testing.T, c *Cluster, name string) (ip4, ip6 string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a := net.ParseIP(in.IP); a == nil {
				continue
			} else if a.To4() != nil {
				ip4 = in.IP
			} else {
				ip6 = in.IP
			}
		}
		return ip4 != "" && ip6 != "", nil
	})
	if err != nil {
		t.Fatalf("Service %s has ingress IPv4 %q and IPv6 %q after 2 minutes: %v; events: %s", name, ip4, ip6, err, c.events(metav1.NamespaceDefault, name))
	}
	return ip4, ip6
}
