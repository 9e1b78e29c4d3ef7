//go:build e2e && linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// TestSharedElasticIP: two Services with one sharing key (DNS over TCP and
// UDP on port 53, the case upstream's users asked for) get one Elastic IP
// from the CCM, and the real MetalLB controller accepts the shared pool for
// both (no AllocationFailed) and its speakers announce the one /32 from
// every node; deleting one keeps the route, deleting the other withdraws it.
func TestSharedElasticIP(t *testing.T) {
	bins := binaries(t)
	ctx := context.Background()
	dir := t.TempDir()
	nodes := []string{"worker-0", "worker-1"}
	h := start(t, WorldOptions{
		Dir: dir, Bins: bins, Devices: []Device{{Name: nodes[0], Metro: "da"}, {Name: nodes[1], Metro: "da"}},
		LoadBalancer: "metallb:///" + dataplane.MetalLBNamespace, Password: password, Logf: t.Logf,
	})
	c := h.c
	h.addSharedService("dns-tcp", v1.ProtocolTCP)
	h.addSharedService("dns-udp", v1.ProtocolUDP)
	ip := h.serviceIP("dns-tcp")
	if other := h.serviceIP("dns-udp"); other != ip {
		t.Fatalf("dns-udp has %s, dns-tcp %s: want one address", other, ip)
	}
	var shared int
	for _, r := range c.Emu.Reservations(emulator.DefaultProjectID) {
		if r.Prefix.Addr().String() == ip {
			shared++
		}
	}
	if shared != 1 {
		t.Fatalf("%d reservations hold %s", shared, ip)
	}
	h.wantRoute(ip, h.ips(nodes...), "the shared Elastic IP")
	for _, name := range []string{"dns-tcp", "dns-udp"} {
		h.eventually("MetalLB assigned "+name, 60*time.Second, func() (bool, string) {
			list, err := c.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				return false, err.Error()
			}
			var seen []string
			allocated := false
			for _, e := range list.Items {
				seen = append(seen, e.Reason+": "+e.Message)
				if e.Reason == "AllocationFailed" {
					t.Fatalf("MetalLB refused %s: %s", name, e.Message)
				}
				allocated = allocated || (e.Reason == "IPAllocated" && strings.Contains(e.Message, ip))
			}
			return allocated, strings.Join(seen, " | ")
		})
	}

	if err := c.Kube.CoreV1().Services("default").Delete(ctx, "dns-tcp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("dns-tcp gone", 60*time.Second, func() (bool, string) {
		_, err := c.Kube.CoreV1().Services("default").Get(ctx, "dns-tcp", metav1.GetOptions{})
		return err != nil, "still there"
	})
	h.wantRoute(ip, h.ips(nodes...), "the shared Elastic IP with one Service left")
	if err := c.Kube.CoreV1().Services("default").Delete(ctx, "dns-udp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantRoute(ip, nil, "the shared Elastic IP after its last Service")
}

// addSharedService is addService for a Service of sharing key dns on port
// 53 of the given protocol, selecting the same pods as the others.
func (h *e2e) addSharedService(name string, proto v1.Protocol) {
	h.t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{
			"metallb.io/allow-shared-ip": "dns", "metal.equinix.com/eip-metro": "da"}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "dns"},
			Ports: []v1.ServicePort{{Name: "dns", Protocol: proto, Port: 53}}},
	}
	if _, err := h.c.Kube.CoreV1().Services("default").Create(h.ctx, svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	ready, node, port, portName := true, "worker-0", int32(53), "dns"
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-e2e",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.53"}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	if _, err := h.c.Kube.DiscoveryV1().EndpointSlices("default").Create(h.ctx, es, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(fmt.Errorf("EndpointSlice of %s: %w", name, err))
	}
}
