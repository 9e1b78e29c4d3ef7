//go:build e2e && linux

package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
)

// TestDualStackRoutes is the IPv6 data plane: a dual-stack cluster whose
// MetalLB speakers run in FRR mode, each driving a bgpd of its own, and
// routers that also peer over IPv6 at Equinix's fc00::e and fc00::f.
// Before any Service has IPv6 the nodes have IPv4 sessions only; then an
// IPv6-only and a dual-stack Service get their Elastic IPs, and every
// address is at both routers with one path per BGP node of its metro: a /32
// over each node's IPv4 session (next hop its private IPv4), a /128 over
// each node's IPv6 session (next hop its public IPv6), AS path the
// project's. Deleting the dual-stack Service withdraws both of its routes.
func TestDualStackRoutes(t *testing.T) {
	bins := binaries(t)
	if err := bins.CheckFRR(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	da, sv := []string{"worker-0", "worker-1"}, []string{"worker-2"}
	h := start(t, WorldOptions{
		Dir: dir, Bins: bins, LoadBalancer: "metallb:///" + dataplane.MetalLBNamespace + "?bgpType=frr", Password: password, Logf: t.Logf,
		Devices:   []Device{{Name: da[0], Metro: "da"}, {Name: da[1], Metro: "da"}, {Name: sv[0], Metro: "sv"}},
		DualStack: true, FRR: true,
	})
	all := append(slices.Clone(da), sv...)

	// IPv4 first: the cluster makes no IPv6 session before it needs one.
	v4 := h.addFamilyService("only-v4", "da", v1.IPFamilyPolicySingleStack, v1.IPv4Protocol)
	h.wantRoute(v4[0], h.ips(da...), "IPv4-only Service over FRR")
	h.wantSessions(all)

	v6 := h.addFamilyService("only-v6", "da", v1.IPFamilyPolicySingleStack, v1.IPv6Protocol)
	h.wantRoutes(v6, da, "IPv6-only Service")
	dual := h.addFamilyService("dual", "sv", v1.IPFamilyPolicyPreferDualStack, v1.IPv4Protocol, v1.IPv6Protocol)
	h.wantRoutes(dual, sv, "dual-stack Service")
	h.wantSessionsFrom(append(h.ips(all...), h.ips6(all...)...))
	// The earlier routes keep all their paths.
	h.wantRoute(v4[0], h.ips(da...), "IPv4-only Service, after IPv6")
	h.wantRoutes(v6, da, "IPv6-only Service, after the dual-stack one")

	if err := h.c.Kube.CoreV1().Services("default").Delete(h.ctx, "dual", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ip := range dual {
		h.wantPrefix(hostPrefix(ip), nil, "deleted dual-stack Service")
	}
	h.wantRoutes(v6, da, "IPv6-only Service, after the delete")
}

// TestDualStackNativeMetalLB: a dual-stack cluster whose MetalLB runs in
// native mode, the default, which announces IPv4 only (and refuses its
// whole configuration once an announced pool holds IPv6). The CCM gives an
// IPv6-only Service no Elastic IP, and a Warning Event naming the fix;
// IPv4 Services before and after it are at both routers, and no node gets
// an IPv6 session.
func TestDualStackNativeMetalLB(t *testing.T) {
	bins := binaries(t)
	dir := t.TempDir()
	nodes := []string{"worker-0", "worker-1"}
	h := start(t, WorldOptions{
		Dir: dir, Bins: bins, LoadBalancer: "metallb:///" + dataplane.MetalLBNamespace, Password: password, Logf: t.Logf,
		Devices: []Device{{Name: nodes[0], Metro: "da"}, {Name: nodes[1], Metro: "da"}}, DualStack: true,
	})
	first := h.addFamilyService("first", "da", v1.IPFamilyPolicySingleStack, v1.IPv4Protocol)
	h.wantRoutes(first, nodes, "an IPv4 Service")
	h.createFamilyService("v6", "da", v1.IPFamilyPolicySingleStack, v1.IPv6Protocol)
	h.eventually("the IPv6-only Service is refused, saying why", 60*time.Second, func() (bool, string) {
		evs, err := h.c.Kube.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=v6,reason=IPFamilyUnsupported"})
		if err != nil {
			return false, err.Error()
		}
		return len(evs.Items) > 0 && strings.Contains(evs.Items[0].Message, "bgpType=frr"), fmt.Sprintf("%d Events", len(evs.Items))
	})
	later := h.addFamilyService("later", "da", v1.IPFamilyPolicySingleStack, v1.IPv4Protocol)
	h.wantRoutes(later, nodes, "an IPv4 Service after the IPv6 one: MetalLB still takes changes")
	h.wantRoutes(first, nodes, "the first IPv4 Service")
	h.wantSessionsFrom(h.ips(nodes...))
}

// addFamilyService creates a LoadBalancer Service of these families in a
// metro, with a ready endpoint of each family, and returns its Elastic IPs
// in the order of its families once the CCM wrote them and MetalLB assigned
// them.
func (h *e2e) addFamilyService(name, metro string, policy v1.IPFamilyPolicy, families ...v1.IPFamily) []string {
	h.t.Helper()
	h.createFamilyService(name, metro, policy, families...)
	return h.familyIPs(name, families)
}

// createFamilyService creates the Service of addFamilyService and its
// EndpointSlices.
func (h *e2e) createFamilyService(name, metro string, policy v1.IPFamilyPolicy, families ...v1.IPFamily) {
	h.t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{"metal.equinix.com/eip-metro": metro}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			IPFamilyPolicy: &policy, IPFamilies: families,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	if _, err := h.c.Kube.CoreV1().Services("default").Create(h.ctx, svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		typ, addr := discoveryv1.AddressTypeIPv4, "10.244.0.10"
		if f == v1.IPv6Protocol {
			typ, addr = discoveryv1.AddressTypeIPv6, "fd00:244::10"
		}
		h.addEndpointSlice(name, name+"-"+strings.ToLower(string(f)), typ, addr)
	}
}

// familyIPs waits for the Service's Elastic IPs, one per family, as the
// CCM wrote them and MetalLB assigned them.
func (h *e2e) familyIPs(name string, families []v1.IPFamily) []string {
	h.t.Helper()
	var ips []string
	h.eventually("Service "+name+" gets an Elastic IP per family", 60*time.Second, func() (bool, string) {
		s, err := h.c.Kube.CoreV1().Services("default").Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		// The CCM's choice: spec.loadBalancerIP for IPv4 only, MetalLB's
		// annotation once there is IPv6.
		ips = nil
		if a := s.Annotations["metallb.io/loadBalancerIPs"]; a != "" {
			ips = strings.Split(a, ",")
		} else if s.Spec.LoadBalancerIP != "" {
			ips = []string{s.Spec.LoadBalancerIP}
		}
		var status []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			status = append(status, in.IP)
		}
		ok := len(ips) == len(families) && slices.Equal(status, ips)
		for i := range ips {
			ok = ok && isIPv6(ips[i]) == (families[i] == v1.IPv6Protocol)
		}
		return ok, fmt.Sprintf("status %v, the CCM's addresses %v, families %v", status, ips, families)
	})
	return ips
}

// wantRoutes: each address at both routers with one path per node of
// nodes, over the session of the address's family.
func (h *e2e) wantRoutes(ips, nodes []string, what string) {
	h.t.Helper()
	for _, ip := range ips {
		hops := h.ips(nodes...)
		if isIPv6(ip) {
			hops = h.ips6(nodes...)
		}
		h.wantPrefix(hostPrefix(ip), hops, what)
	}
}

func (h *e2e) wantPrefix(prefix string, nextHops []string, what string) {
	h.t.Helper()
	took, err := h.c.WaitRoute(h.ctx, prefix, nextHops, dataplane.ProjectASN, 60*time.Second)
	if err != nil {
		h.t.Fatalf("%s: routers: %v", what, err)
	}
	h.t.Logf("%s: %s via %v at both routers after %s", what, prefix, nextHops, took.Round(time.Millisecond))
}

// ips6 are the nodes' public IPv6 addresses, their IPv6 BGP source.
func (h *e2e) ips6(nodes ...string) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, h.c.NodeIPv6[n])
	}
	return out
}

func isIPv6(ip string) bool { return strings.Contains(ip, ":") }

// hostPrefix is ip as a /32 or /128, as the routers list it.
func hostPrefix(ip string) string {
	a := netip.MustParseAddr(ip)
	return netip.PrefixFrom(a, a.BitLen()).String()
}
