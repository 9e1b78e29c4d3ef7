package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

var ipAddressPools = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}

// TestNodeAndServiceLifecycle: a node is initialised and gets its BGP
// annotations; a Service gets an Elastic IP with the three tags, its status,
// spec.loadBalancerIP and a MetalLB pool; deleting it releases the
// reservation and prunes the pool. Every call is allowed by deploy/'s RBAC.
func TestNodeAndServiceLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	dev, _ := h.emu.DeviceByHostname(emulator.DefaultProjectID, "node-0")
	h.addNode("node-0", map[string]string{"node-role.kubernetes.io/worker": ""})

	h.eventually("node initialised", func() (bool, string) {
		n, err := h.kube.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
				return false, "still tainted uninitialized"
			}
		}
		if n.Spec.ProviderID != "equinixmetal://"+dev.ID {
			return false, fmt.Sprintf("taints %v providerID %q", n.Spec.Taints, n.Spec.ProviderID)
		}
		want := map[string]string{v1.LabelTopologyRegion: "da", v1.LabelTopologyZone: "da11", v1.LabelInstanceTypeStable: "c3.small.x86"}
		for k, v := range want {
			if n.Labels[k] != v {
				return false, fmt.Sprintf("labels %v", n.Labels)
			}
		}
		var internal, external bool
		for _, a := range n.Status.Addresses {
			internal = internal || a.Type == v1.NodeInternalIP
			external = external || a.Type == v1.NodeExternalIP
		}
		if !internal || !external {
			return false, fmt.Sprintf("addresses %v", n.Status.Addresses)
		}
		if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] == "" || n.Annotations["metal.equinix.com/network-4-private"] == "" {
			return false, fmt.Sprintf("annotations %v", n.Annotations)
		}
		return true, ""
	})
	if len(h.emu.BGPSessions(dev.ID)) != 1 {
		t.Fatalf("device BGP sessions: %v", h.emu.BGPSessions(dev.ID))
	}
	if bgp, ok := h.emu.BGPConfig(emulator.DefaultProjectID); !ok || bgp.Status == "disabled" {
		t.Fatalf("project BGP not enabled: %+v", bgp)
	}

	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "sv"}, "")
	var ip string
	h.eventually("service gets an EIP", func() (bool, string) {
		var msg string
		ip, msg = h.serviceIP("web")
		return ip != "", msg
	})
	tags := eip.Tags(h.clusterID(), "default", "web")
	res := h.emu.Reservations(emulator.DefaultProjectID, tags...)
	if len(res) != 1 || res[0].Prefix.Addr().String() != ip || res[0].Metro != "sv" {
		t.Fatalf("reservations with the service's tags: %+v (ip %s)", res, ip)
	}
	svc, _ := h.kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if svc.Spec.LoadBalancerIP != ip {
		t.Fatalf("spec.loadBalancerIP = %q, want %s", svc.Spec.LoadBalancerIP, ip)
	}
	dyn := dynamic.NewForConfigOrDie(h.env.Config)
	h.waitForPool("MetalLB pool for the service", ip)
	ev := h.events("web")
	for _, reason := range []string{eip.ReasonRequested, eip.ReasonReserved, eip.ReasonAssigned} {
		if !strings.Contains(ev, reason) {
			t.Errorf("no %s event; events: %s", reason, ev)
		}
	}

	if err := h.kube.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("reservation released and pool pruned", func() (bool, string) {
		if n := len(h.emu.Reservations(emulator.DefaultProjectID, tags...)); n != 0 {
			return false, fmt.Sprintf("%d reservations left", n)
		}
		list, err := dyn.Resource(ipAddressPools).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d pools left", len(list.Items))
	})
	h.checkRBAC()
}

// TestBringYourOwnIPReservesNothing: a Service with spec.loadBalancerIP, an
// Elastic IP the user reserved in the project.
func TestBringYourOwnIPReservesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	mine, err := h.emu.AddReservation(emulator.ReservationSeed{Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	own := mine.Prefix.Addr().String()
	h.addService("byo", nil, own)
	h.eventually("status shows the given IP", func() (bool, string) {
		ip, msg := h.serviceIP("byo")
		return ip == own, msg
	})
	if n := h.emu.Count(emulator.RouteRequestIPReservation); n != 0 {
		t.Fatalf("%d reservation requests for a bring-your-own IP", n)
	}
}

// TestRestartAdoptsReservation: the CCM reserved an IP and died before the
// Service's status was written; the next CCM finds the reservation by its
// tags instead of reserving a second one. Another cluster's reservation for
// a Service of the same name is never touched.
func TestRestartAdoptsReservation(t *testing.T) {
	t.Parallel()
	first := newHarness(t, harnessOptions{})
	clusterID := first.clusterID()
	first.Stop()

	// What the dead CCM left behind, plus another cluster's EIP for the same Service name.
	ours, err := first.emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: eip.Tags(clusterID, "default", "web"), Details: eip.Details})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := first.emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: eip.Tags("another-cluster", "default", "web"), Details: eip.Details})
	if err != nil {
		t.Fatal(err)
	}
	first.emu.ResetCounts()

	h := newHarness(t, harnessOptions{emu: first.emu, env: first.env})
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.eventually("service adopts the existing reservation", func() (bool, string) {
		ip, msg := h.serviceIP("web")
		return ip == ours.Prefix.Addr().String(), fmt.Sprintf("ip %q %s", ip, msg)
	})
	if n := h.emu.Count(emulator.RouteRequestIPReservation); n != 0 {
		t.Fatalf("%d reservation requests after a restart; want the existing one adopted", n)
	}

	if err := h.kube.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("our reservation released", func() (bool, string) {
		_, ok := h.emu.Reservation(ours.ID)
		return !ok, "still there"
	})
	if _, ok := h.emu.Reservation(theirs.ID); !ok {
		t.Fatal("the other cluster's reservation was released")
	}
}

// TestNoLocationIsAClearEvent: without a metro anywhere the Service gets a
// Warning naming the annotations to set, and nothing is reserved.
func TestNoLocationIsAClearEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.addService("nowhere", nil, "")
	h.eventually("warning event", func() (bool, string) {
		ev := h.events("nowhere")
		return strings.Contains(ev, eip.ReasonFailed) && strings.Contains(ev, "metal.equinix.com/eip-metro"), ev
	})
	if n := h.emu.Count(emulator.RouteRequestIPReservation); n != 0 {
		t.Fatalf("%d reservation requests without a location", n)
	}
}

// TestLargeProject: device lookup by hostname and reservation lookup by tag
// in a project of 2,000 devices and 1,500 reservations (upstream read only
// the first 10 devices and the first 250 reservations).
func TestLargeProject(t *testing.T) {
	t.Parallel()
	seed := testSeed(0)
	emu := emulator.StartForTest(t, seed, emulator.Options{})
	if _, err := emu.AddDevices(2000, emulator.DeviceSeed{Hostname: "bulk-%d", Metro: "da"}); err != nil {
		t.Fatal(err)
	}
	if _, err := emu.AddReservations(1500, emulator.ReservationSeed{Metro: "da"}, func(i int) []string {
		return []string{fmt.Sprintf("other=%d", i)}
	}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{emu: emu})
	last := "bulk-1999"
	if _, ok := emu.DeviceByHostname(emulator.DefaultProjectID, last); !ok {
		t.Fatalf("the emulator has no device %s; check the AddDevices hostname template", last)
	}
	h.addNode(last, nil)
	h.eventually("the last device's node is initialised", func() (bool, string) {
		n, err := h.kube.CoreV1().Nodes().Get(context.Background(), last, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n.Spec.ProviderID != "", fmt.Sprintf("providerID %q", n.Spec.ProviderID)
	})
	// A reservation for a Service, beyond the first 1,500 others.
	pre, err := emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: eip.Tags(h.clusterID(), "default", "late")})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cloud.metal.RefreshReservations(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.addService("late", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.eventually("adopts the reservation among 1,500 others", func() (bool, string) {
		ip, msg := h.serviceIP("late")
		return ip == pre.Prefix.Addr().String(), msg
	})
}

// waitForPool waits until a MetalLB IPAddressPool in metallb-system holds
// ip/32.
func (h *harness) waitForPool(what, ip string) {
	h.t.Helper()
	dyn := dynamic.NewForConfigOrDie(h.env.Config)
	h.eventually(what, func() (bool, string) {
		list, err := dyn.Resource(ipAddressPools).Namespace("metallb-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			if strings.Contains(fmt.Sprint(p.Object["spec"]), ip+"/32") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pools", len(list.Items))
	})
}

// TestServicesAndNodesWatchedOnce: the CCM's loops share the framework's
// informers (SetInformers), so every Service and Node is cached once. Two
// watches of a kind would mean two caches of it: at 10,000 Services about
// 20 MB more.
func TestServicesAndNodesWatchedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.addNode("node-0", nil)
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	var ip string
	h.eventually("web has its Elastic IP", func() (bool, string) {
		got, msg := h.serviceIP("web")
		ip = got
		return got != "", msg
	})
	h.waitForPool("web's pool", ip) // the module loop runs
	events, err := h.env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	watches := map[string]int{}
	for _, c := range testenv.CallsBy(testenv.Calls(events), ccmUser) {
		// The control-plane EIP's informer of default/kubernetes is
		// namespaced; only cluster-wide watches are caches of every object.
		if c.Verb == "watch" && c.APIGroup == "" && c.Namespace == "" && (c.Resource == "services" || c.Resource == "nodes") {
			watches[c.Resource]++
		}
	}
	for _, kind := range []string{"services", "nodes"} {
		if watches[kind] != 1 {
			t.Errorf("%d cluster-wide watches of %s by the CCM, want 1 (one shared informer)", watches[kind], kind)
		}
	}
}
