package provider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// sharedService is a LoadBalancer Service in default with the sharing key
// (the current annotation form, or the older one when legacy is set), the
// given annotations and ports ("TCP/80").
func (h *harness) sharedService(name, key string, legacy bool, annotations map[string]string, ports ...string) *v1.Service {
	h.t.Helper()
	return h.sharedServiceWith(name, key, legacy, annotations, nil, ports...)
}

// sharedServiceWith is sharedService with a change before it is created.
func (h *harness) sharedServiceWith(name, key string, legacy bool, annotations map[string]string, change func(*v1.Service), ports ...string) *v1.Service {
	h.t.Helper()
	ann := map[string]string{}
	for k, v := range annotations {
		ann[k] = v
	}
	if legacy {
		ann[lbsnapshot.LegacySharingAnnotation] = key
	} else {
		ann[lbsnapshot.SharingAnnotation] = key
	}
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: ann},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
	}
	for i, p := range ports {
		proto, port, _ := strings.Cut(p, "/")
		var n int32
		if _, err := fmt.Sscan(port, &n); err != nil {
			h.t.Fatal(err)
		}
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: v1.Protocol(proto), Port: n})
	}
	if change != nil {
		change(s)
	}
	out, err := h.kube.CoreV1().Services("default").Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// deleteService deletes a Service and waits until it is gone (the service
// controller has released it and removed its finalizer).
func (h *harness) deleteService(name string) {
	h.t.Helper()
	ctx := context.Background()
	if err := h.kube.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.eventually("Service "+name+" gone", func() (bool, string) {
		_, err := h.kube.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

// poolsWith lists the MetalLB pools whose addresses include ip.
func (h *harness) poolsWith(ip string) ([]string, string) {
	dyn := dynamic.NewForConfigOrDie(h.env.Config)
	list, err := dyn.Resource(ipAddressPools).Namespace("metallb-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err.Error()
	}
	var names []string
	for _, p := range list.Items {
		if strings.Contains(fmt.Sprint(p.Object["spec"]), ip+"/32") {
			names = append(names, p.GetName()+" "+p.GetAnnotations()["metal.equinix.com/services"])
		}
	}
	return names, fmt.Sprintf("%d pools in all", len(list.Items))
}

var da = map[string]string{"metal.equinix.com/eip-metro": "da"}

// TestSharedElasticIP: three Services of one key (in both annotation forms)
// get one reservation, tagged for the key, and one pool; all three have the
// address. Deleting two keeps it; deleting the third releases it.
func TestSharedElasticIP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.sharedService("dns-tcp", "dns", false, da, "TCP/53")
	h.sharedService("dns-udp", "dns", true, da, "UDP/53")
	h.sharedService("web", "dns", false, da, "TCP/80", "TCP/443")
	tags := eip.SharedTags(h.clusterID(), "dns")

	var ip string
	h.eventually("all three Services have one address", func() (bool, string) {
		var ips []string
		for _, n := range []string{"dns-tcp", "dns-udp", "web"} {
			got, msg := h.serviceIP(n)
			if got == "" {
				return false, n + ": " + msg
			}
			ips = append(ips, got)
		}
		ip = ips[0]
		return ips[1] == ip && ips[2] == ip, fmt.Sprint(ips)
	})
	res := h.emu.Reservations(emulator.DefaultProjectID, tags...)
	if len(res) != 1 || res[0].Prefix.Addr().String() != ip || res[0].Metro != "da" {
		t.Fatalf("reservations with the key's tags: %+v (ip %s)", res, ip)
	}
	if n := h.emu.Count(emulator.RouteRequestIPReservation); n != 1 {
		t.Fatalf("%d reservation requests for one key, want 1", n)
	}
	for _, n := range []string{"dns-tcp", "dns-udp", "web"} {
		if own := h.emu.Reservations(emulator.DefaultProjectID, eip.Tags(h.clusterID(), "default", n)...); len(own) != 0 {
			t.Fatalf("Service %s has a reservation of its own: %+v", n, own)
		}
	}
	var pool string
	h.eventually("one pool with the three Services", func() (bool, string) {
		pools, msg := h.poolsWith(ip)
		if len(pools) != 1 || pools[0] != "shared."+ip+" default/dns-tcp,default/dns-udp,default/web" {
			return false, fmt.Sprintf("%q (%s)", pools, msg)
		}
		pool = pools[0]
		return true, ""
	})

	h.deleteService("dns-tcp")
	h.deleteService("web")
	if res := h.emu.Reservations(emulator.DefaultProjectID, tags...); len(res) != 1 {
		t.Fatalf("the shared reservation went with two of its three Services: %+v", res)
	}
	if ev := h.events("web"); !strings.Contains(ev, eip.ReasonShareKept) {
		t.Errorf("no %s Event on a deleted Service of the key; events: %s", eip.ReasonShareKept, ev)
	}
	if got, msg := h.serviceIP("dns-udp"); got != ip {
		t.Fatalf("the last Service's address is %q, want %s (%s)", got, ip, msg)
	}
	h.eventually("the pool keeps its name with one Service left", func() (bool, string) {
		pools, msg := h.poolsWith(ip)
		return len(pools) == 1 && pools[0] == "shared."+ip+" default/dns-udp", fmt.Sprintf("%q (%s), before: %q", pools, msg, pool)
	})

	h.deleteService("dns-udp")
	h.eventually("released with the last Service, pool pruned", func() (bool, string) {
		if res := h.emu.Reservations(emulator.DefaultProjectID, tags...); len(res) != 0 {
			return false, fmt.Sprintf("%d reservations left", len(res))
		}
		pools, msg := h.poolsWith(ip)
		return len(pools) == 0, fmt.Sprintf("%q (%s)", pools, msg)
	})
	h.checkRBAC()
}

// TestSharedElasticIPPortClash: a Service whose port clashes with one that
// has the key's address is refused with an Event naming both and gets no
// address; one that differs in externalTrafficPolicy too. Once the Service
// in the way is gone, the refused one gets the address.
func TestSharedElasticIPPortClash(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.sharedService("first", "k", false, da, "TCP/80")
	var ip string
	h.eventually("first has the address", func() (bool, string) {
		var msg string
		ip, msg = h.serviceIP("first")
		return ip != "", msg
	})
	h.sharedService("clash", "k", false, da, "TCP/443", "TCP/80")
	h.sharedServiceWith("local", "k", false, da, func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.Selector = map[string]string{"app": "x"}
	}, "TCP/8080")
	for name, want := range map[string]string{
		"clash": "both use port TCP/80",
		"local": "externalTrafficPolicy differs",
	} {
		h.eventually(name+" refused with an Event naming both", func() (bool, string) {
			ev := h.events(name)
			return strings.Contains(ev, eip.ReasonShareRefused+": Service default/"+name+" cannot share its Elastic IP with default/first") &&
				strings.Contains(ev, want), ev
		})
		if got, _ := h.serviceIP(name); got != "" {
			t.Fatalf("refused Service %s has the address %s", name, got)
		}
	}
	if n := h.emu.Count(emulator.RouteRequestIPReservation); n != 1 {
		t.Fatalf("%d reservation requests, want 1", n)
	}

	// The Service in the way goes: the clashing one (retried by the service
	// controller) gets the address, which stays reserved for it. The
	// controller retries a failed Service with exponential backoff (5 s
	// doubling), hence the longer wait.
	h.deleteService("first")
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 4*time.Minute, true, func(context.Context) (bool, error) {
		got, msg := h.serviceIP("clash")
		last = fmt.Sprintf("%q %s", got, msg)
		return got == ip, nil
	})
	if err != nil {
		t.Fatalf("the refused Service never got the address once first was gone: %s", last)
	}
	if res := h.emu.Reservations(emulator.DefaultProjectID, eip.SharedTags(h.clusterID(), "k")...); len(res) != 1 {
		t.Fatalf("the key's reservation: %+v", res)
	}
}

// TestSharedElasticIPKeyRemoved: a Service that drops its key gets its own
// Elastic IP; the key's address stays with the others (no ElasticIPLost,
// no release). One that moves to another key gets that key's address, and
// the old key's reservation goes when its last Service has left.
func TestSharedElasticIPKeyRemoved(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.sharedService("a", "k", false, da, "TCP/80")
	h.sharedService("b", "k", false, da, "TCP/443")
	var shared string
	h.eventually("both share", func() (bool, string) {
		a, msg := h.serviceIP("a")
		b, _ := h.serviceIP("b")
		shared = a
		return a != "" && a == b, msg
	})

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, lbsnapshot.SharingAnnotation)
	if _, err := h.kube.CoreV1().Services("default").Patch(context.Background(), "b", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var own string
	h.eventually("b has its own Elastic IP", func() (bool, string) {
		var msg string
		own, msg = h.serviceIP("b")
		res := h.emu.Reservations(emulator.DefaultProjectID, eip.Tags(h.clusterID(), "default", "b")...)
		return own != "" && own != shared && len(res) == 1 && res[0].Prefix.Addr().String() == own, fmt.Sprintf("%q %s; %d own reservations", own, msg, len(res))
	})
	if got, _ := h.serviceIP("a"); got != shared {
		t.Fatalf("a's address changed to %q, want %s", got, shared)
	}
	if res := h.emu.Reservations(emulator.DefaultProjectID, eip.SharedTags(h.clusterID(), "k")...); len(res) != 1 {
		t.Fatalf("the key's reservation: %+v, want it kept for a", res)
	}
	if ev := h.events("b"); strings.Contains(ev, eip.ReasonLost) {
		t.Fatalf("leaving a key is not a lost Elastic IP; events: %s", ev)
	}

	// a moves to key k2: the k reservation has no Service left and goes.
	patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"k2"}}}`, lbsnapshot.SharingAnnotation)
	if _, err := h.kube.CoreV1().Services("default").Patch(context.Background(), "a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("a has k2's address and k's reservation is released", func() (bool, string) {
		got, msg := h.serviceIP("a")
		k2 := h.emu.Reservations(emulator.DefaultProjectID, eip.SharedTags(h.clusterID(), "k2")...)
		k := h.emu.Reservations(emulator.DefaultProjectID, eip.SharedTags(h.clusterID(), "k")...)
		return len(k2) == 1 && got == k2[0].Prefix.Addr().String() && len(k) == 0, fmt.Sprintf("%q %s; k2 %d, k %d", got, msg, len(k2), len(k))
	})
}

// TestSharedElasticIPConcurrentCreate: Services of one key created at once,
// synced by concurrent workers, make one reservation.
func TestSharedElasticIPConcurrentCreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{workers: 8})
	const n = 8
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.sharedService(fmt.Sprintf("s%d", i), "burst", false, da, fmt.Sprintf("TCP/%d", 8000+i))
		}()
	}
	wg.Wait()
	h.eventually("every Service has the one address", func() (bool, string) {
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			ip, msg := h.serviceIP(fmt.Sprintf("s%d", i))
			if ip == "" {
				return false, fmt.Sprintf("s%d: %s", i, msg)
			}
			seen[ip] = true
		}
		return len(seen) == 1, fmt.Sprint(seen)
	})
	if res := h.emu.Reservations(emulator.DefaultProjectID, eip.SharedTags(h.clusterID(), "burst")...); len(res) != 1 {
		t.Fatalf("%d reservations for one key", len(res))
	}
	if c := h.emu.Count(emulator.RouteRequestIPReservation); c != 1 {
		t.Fatalf("%d reservation requests for one key, want 1", c)
	}
}

// TestSharedElasticIPDifferentMetros: placement applies once per key; a
// Service of the key placed in another metro is refused, naming both
// locations and the Service that has the address.
func TestSharedElasticIPDifferentMetros(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.sharedService("east", "geo", false, da, "TCP/80")
	h.eventually("east has the address", func() (bool, string) {
		ip, msg := h.serviceIP("east")
		return ip != "", msg
	})
	h.sharedService("west", "geo", false, map[string]string{"metal.equinix.com/eip-metro": "sv"}, "TCP/443")
	h.eventually("west refused", func() (bool, string) {
		ev := h.events("west")
		return strings.Contains(ev, eip.ReasonShareRefused) && strings.Contains(ev, "metro sv") &&
			strings.Contains(ev, "metro da") && strings.Contains(ev, "default/east"), ev
	})
	if ip, _ := h.serviceIP("west"); ip != "" {
		t.Fatalf("west has %s", ip)
	}
	if c := h.emu.Count(emulator.RouteRequestIPReservation); c != 1 {
		t.Fatalf("%d reservation requests, want 1", c)
	}
}
