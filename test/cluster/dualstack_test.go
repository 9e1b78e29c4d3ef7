//go:build cluster && linux

package cluster

import (
	"context"
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

	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, NetexecDeployment("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, c, "web", 2)
	svc := LoadBalancerService("web", "web", corev1.ServiceExternalTrafficPolicyCluster)
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc.Spec.IPFamilyPolicy = &policy
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip4, ip6 := dualIngress(t, c, "web")
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
