package provider

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// TestIPFamiliesOnDualStackCluster: on an apiserver with IPv4 and IPv6
// Service ranges (where an IPv6-only Service can exist at all), a
// PreferDualStack Service gets its IPv4 Elastic IP and is told the IPv6
// half is missing; IPv6-only and RequireDualStack Services get nothing and
// a Warning naming the fix, and nothing is reserved for them.
func TestIPFamiliesOnDualStackCluster(t *testing.T) {
	env := testenv.New(t, testenv.Options{AuditLog: true, Users: testUsers,
		APIServerFlags: []string{"--service-cluster-ip-range=10.0.0.0/24,fd00:10::/108"}})
	h := newHarness(t, harnessOptions{env: env})
	h.addNode("node-0", nil)
	prefer, require, single := v1.IPFamilyPolicyPreferDualStack, v1.IPFamilyPolicyRequireDualStack, v1.IPFamilyPolicySingleStack
	create := func(name string, policy v1.IPFamilyPolicy, families ...v1.IPFamily) *v1.Service {
		t.Helper()
		s := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{"metal.equinix.com/eip-metro": "da"}},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, IPFamilyPolicy: &policy, IPFamilies: families,
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		}
		out, err := h.kube.CoreV1().Services("default").Create(context.Background(), s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	dual := create("dual", prefer)
	if len(dual.Spec.IPFamilies) != 2 {
		t.Fatalf("the apiserver gave PreferDualStack the families %v: not a dual-stack cluster", dual.Spec.IPFamilies)
	}
	create("v6", single, v1.IPv6Protocol)
	create("both", require)

	h.eventually("dual has its IPv4 Elastic IP and a Normal "+eip.ReasonIPv4Only, func() (bool, string) {
		ip, msg := h.serviceIP("dual")
		if ip == "" || strings.Contains(ip, ":") {
			return false, "ingress " + ip + " " + msg
		}
		return len(h.serviceEvents("dual", eip.ReasonIPv4Only)) > 0, "no Event yet"
	})
	for _, name := range []string{"v6", "both"} {
		h.eventually(name+" refused with "+eip.ReasonFamilyUnsupported, func() (bool, string) {
			evs := h.serviceEvents(name, eip.ReasonFamilyUnsupported)
			return len(evs) > 0 && evs[0].Type == v1.EventTypeWarning, h.events(name)
		})
		if ip, _ := h.serviceIP(name); ip != "" {
			t.Errorf("%s got the address %s", name, ip)
		}
	}
	if n := h.emu.Count(emulator.RouteRequestIPReservation); n != 1 {
		t.Errorf("%d reservation requests, want 1 (dual's)", n)
	}
}
