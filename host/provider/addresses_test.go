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
	"k8s.io/client-go/dynamic"
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
// or an IPv6 one on an IPv4 Service, is refused with one Event that names the field and the
// fix; the Service is not retried in a loop; nothing is reserved; and
// fixing the field is acted on at once.
func TestInvalidLoadBalancerIP(t *testing.T) {
	t.Parallel()
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

// TestRestoredServiceIsRefused: the audit's case. A Service is saved
// (kubectl get -o yaml, a backup), deleted (the CCM releases its Elastic
// IP) and created again from the saved object without managedFields: its
// spec.loadBalancerIP now reads as the user's own address, which the
// project no longer holds. The sync fails with a SyncLoadBalancerFailed
// Event naming the address, the project, the metro and the fix; the
// Service gets no status and no MetalLB pool; the retries cost no Equinix
// call; and removing the field gives it a new Elastic IP.
func TestRestoredServiceIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	h.addNode("node-0", nil)
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	var old string
	h.eventually("web gets an Elastic IP", func() (bool, string) {
		ip, why := h.serviceIP("web")
		old = ip
		return ip != "", why
	})
	saved, err := h.kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.kube.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("web is gone and its Elastic IP released", func() (bool, string) {
		_, err := h.kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		n := len(h.emu.ElasticReservations(emulator.DefaultProjectID))
		return err != nil && n == 0, fmt.Sprintf("get: %v, %d reservations", err, n)
	})

	// The restore: the saved object as `kubectl apply` of its YAML creates it.
	restored := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: saved.Annotations},
		Spec:       *saved.Spec.DeepCopy(),
	}
	restored.Spec.ClusterIP, restored.Spec.ClusterIPs = "", nil
	// kube-apiserver frees the old Service's node ports a moment after
	// the object is gone: until then the saved nodePort is refused as
	// "already allocated", as a restore would meet it.
	h.eventually("the saved web is created again", func() (bool, string) {
		_, err := h.kube.CoreV1().Services("default").Create(ctx, restored.DeepCopy(), metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "already allocated") {
			t.Fatal(err)
		}
		return err == nil, fmt.Sprint(err)
	})
	h.eventually("the restored web is refused with the reason and the fix", func() (bool, string) {
		ev := h.serviceEvents("web", "SyncLoadBalancerFailed")
		if len(ev) == 0 {
			return false, h.events("web")
		}
		msg := ev[len(ev)-1].Message
		for _, want := range []string{old, "is not an Elastic IP reservation of project " + emulator.DefaultProjectID + " in metro da", "remove spec.loadBalancerIP"} {
			if !strings.Contains(msg, want) {
				return false, fmt.Sprintf("message lacks %q: %s", want, msg)
			}
		}
		return true, ""
	})
	h.emu.ResetCounts()
	// The service controller retries (after 5 s, then 10 s): from the
	// reservation cache, without an Equinix call.
	time.Sleep(17 * time.Second)
	if n, detail := apiCalls(h.emu); n != 0 {
		t.Errorf("retries of the refused Service made %d Equinix calls: %s", n, detail)
	}
	if ip, _ := h.serviceIP("web"); ip != "" {
		t.Errorf("the restored Service has the address %s in its status", ip)
	}
	dyn := dynamic.NewForConfigOrDie(h.env.Config)
	list, err := dyn.Resource(ipAddressPools).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if strings.Contains(fmt.Sprint(p.Object["spec"]), old) {
			t.Errorf("MetalLB pool %s has the address the project no longer holds: %v", p.GetName(), p.Object["spec"])
		}
	}

	// The fix the message names.
	patch := []byte(`{"spec":{"loadBalancerIP":null}}`)
	if _, err := h.kube.CoreV1().Services("default").Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("web gets a new Elastic IP once its spec.loadBalancerIP is removed", func() (bool, string) {
		ip, why := h.serviceIP("web")
		return ip != "", why
	})
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

// TestOwnAddressOfAnotherMetroIsNotAnnounced: a user's own address that
// the project holds in metro sv, on a Service placed in da, is refused (an
// Elastic IP is routed only in its metro) and must not reach the
// load-balancer module either, or MetalLB would allocate it from the pool
// the module wrote and report an address no router accepts. An own
// address held in da, on a Service created after it, gets its pool and
// status: by then the module has seen both.
func TestOwnAddressOfAnotherMetroIsNotAnnounced(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	there, err := h.emu.AddReservation(emulator.ReservationSeed{Metro: "sv"})
	if err != nil {
		t.Fatal(err)
	}
	here, err := h.emu.AddReservation(emulator.ReservationSeed{Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	thereIP, hereIP := there.Prefix.Addr().String(), here.Prefix.Addr().String()
	da := map[string]string{"metal.equinix.com/eip-metro": "da"}
	h.addService("byo-there", da, thereIP)
	h.eventually("byo-there refused, naming the metro it is reserved in", func() (bool, string) {
		evs := h.serviceEvents("byo-there", "SyncLoadBalancerFailed")
		return len(evs) > 0 && strings.Contains(evs[0].Message, "it is reserved in metro sv"), fmt.Sprintf("%d events", len(evs))
	})
	h.addService("byo-here", da, hereIP)
	h.eventually("byo-here's own address in its status and a pool", func() (bool, string) {
		ip, msg := h.serviceIP("byo-here")
		pools, pmsg := h.poolsWith(hereIP)
		return ip == hereIP && len(pools) == 1, msg + "; " + pmsg
	})
	if pools, _ := h.poolsWith(thereIP); len(pools) != 0 {
		t.Errorf("the refused address %s is in pools %v: the module was given it", thereIP, pools)
	}
	if ip, _ := h.serviceIP("byo-there"); ip != "" {
		t.Errorf("byo-there has %s in its status", ip)
	}
}
