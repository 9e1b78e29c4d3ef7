package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// serviceEvents returns the Service's Events with the given reason.
func (h *harness) serviceEvents(name, reason string) []v1.Event {
	h.t.Helper()
	list, err := h.kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

// TestInvalidLoadBalancerIP: a spec.loadBalancerIP that is not an address,
// or an IPv6 one, is refused with one Event that names the field and the
// fix; the Service is not retried in a loop; nothing is reserved; and
// fixing the field is acted on at once.
func TestInvalidLoadBalancerIP(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	h.addNode("node-0", nil)
	cases := map[string]string{"bad": "not-an-ip", "v6": "2604:1380:4641::1"}
	for name, ip := range cases {
		h.addService(name, map[string]string{"metal.equinix.com/eip-metro": "da"}, ip)
	}
	for name, ip := range cases {
		h.eventually(name+" gets an InvalidLoadBalancerIP Event", func() (bool, string) {
			ev := h.serviceEvents(name, eip.ReasonInvalidIP)
			if len(ev) == 0 {
				return false, h.events(name)
			}
			msg := ev[0].Message
			if !strings.Contains(msg, "spec.loadBalancerIP") || !strings.Contains(msg, ip) || !strings.Contains(msg, "remove the field") {
				return false, "message lacks the field, the value or the fix: " + msg
			}
			return true, ""
		})
	}
	// Long enough for the service controller's exponential backoff (5 s,
	// then 10 s) to have retried at least once, had the error been an
	// ordinary one.
	time.Sleep(17 * time.Second)
	for name := range cases {
		ev := h.serviceEvents(name, eip.ReasonInvalidIP)
		if len(ev) != 1 || ev[0].Count > 1 {
			t.Errorf("%s: %d InvalidLoadBalancerIP Events (first count %d), want one, once: the Service is being retried", name, len(ev), countOf(ev))
		}
		for _, reason := range []string{"EnsuringLoadBalancer", "SyncLoadBalancerFailed"} {
			if ev := h.serviceEvents(name, reason); len(ev) != 1 || ev[0].Count > 1 {
				t.Errorf("%s: %s %d times, want once", name, reason, countOf(ev))
			}
		}
		if ip, _ := h.serviceIP(name); ip != "" {
			t.Errorf("%s has the address %s", name, ip)
		}
	}
	if n := len(h.emu.ElasticReservations(emulator.DefaultProjectID)); n != 0 {
		t.Errorf("%d reservations, want none", n)
	}

	// Removing the bad value is synced at once, despite the long retry.
	patch := []byte(`{"spec":{"loadBalancerIP":null}}`)
	if _, err := h.kube.CoreV1().Services("default").Patch(ctx, "bad", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("bad gets an Elastic IP once its spec.loadBalancerIP is removed", func() (bool, string) {
		ip, why := h.serviceIP("bad")
		return ip != "", why
	})
	h.checkRBAC()
}

func countOf(ev []v1.Event) int32 {
	var n int32
	for _, e := range ev {
		n += max(e.Count, 1)
	}
	return n
}

// TestLostReservation: a Service's Elastic IP is deleted outside the CCM
// (as in the console). At the Service's next sync the CCM says so (Event,
// metric, log), reserves a new Elastic IP and moves the Service to it,
// instead of keeping the dead address as if the user had brought it.
func TestLostReservation(t *testing.T) {
	h := newHarness(t, harnessOptions{settings: map[string]any{"cacheRefreshPeriod": "1s"}})
	ctx := context.Background()
	h.addNode("node-0", nil)
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	var old string
	h.eventually("web gets an Elastic IP", func() (bool, string) {
		ip, why := h.serviceIP("web")
		old = ip
		return ip != "", why
	})
	tags := eip.Tags(h.clusterID(), "default", "web")
	own := h.emu.ElasticReservations(emulator.DefaultProjectID, tags...)
	if len(own) != 1 {
		t.Fatalf("%d reservations with web's tags, want 1", len(own))
	}
	lostBefore := metricValue(t, "equinix_metal_eip_lost_total")

	// Deleted in the console.
	if _, err := h.emu.Client(emulator.DefaultToken).IPAddressesApi.DeleteIPAddress(ctx, own[0].ID).Execute(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the CCM's cache refreshes every second here
	patch := []byte(`{"metadata":{"annotations":{"example.com/touched":"1"}}}`)
	if _, err := h.kube.CoreV1().Services("default").Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	var fresh string
	h.eventually("web is reported and moved to a new Elastic IP", func() (bool, string) {
		ev := h.serviceEvents("web", eip.ReasonLost)
		if len(ev) == 0 {
			return false, h.events("web")
		}
		s, err := h.kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 || s.Status.LoadBalancer.Ingress[0].IP == old || s.Spec.LoadBalancerIP != s.Status.LoadBalancer.Ingress[0].IP {
			return false, fmt.Sprintf("status %v spec.loadBalancerIP %s", s.Status.LoadBalancer.Ingress, s.Spec.LoadBalancerIP)
		}
		fresh = s.Spec.LoadBalancerIP
		if msg := ev[0].Message; !strings.Contains(msg, old) || !strings.Contains(msg, fresh) {
			return false, "the Event does not name both addresses: " + msg
		}
		return true, ""
	})
	if got := h.emu.ElasticReservations(emulator.DefaultProjectID, tags...); len(got) != 1 || got[0].Prefix.Addr().String() != fresh {
		t.Errorf("reservations with web's tags: %v, want exactly the new one (%s)", got, fresh)
	}
	if after := metricValue(t, "equinix_metal_eip_lost_total"); after != lostBefore+1 {
		t.Errorf("equinix_metal_eip_lost_total went from %v to %v, want +1", lostBefore, after)
	}
	h.checkRBAC()
}

func metricValue(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	return 0
}
