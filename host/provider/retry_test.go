package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// TestRetriedWhenAPIAnswersAgain: a Service created while the Equinix
// Metal API does not answer gets its address once the API answers again,
// without waiting for the service controller's next retry; one deleted
// meanwhile has its Elastic IP released.
//
// The controller retries a failed Service 5, 15, 35 and 75 s after its
// first failure, then at 155 s (its backoff doubles from 5 s; each attempt
// fails at once here, with apiRetries 0). The API comes back at 77 s, and
// the address must come within the 60 s of eventually: before 155 s, so
// from something other than that retry (host/lbretry).
func TestRetriedWhenAPIAnswersAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{settings: map[string]any{"apiRetries": 0}})
	h.addNode("node-0", nil)
	metro := map[string]string{"metal.equinix.com/eip-metro": "da"}
	h.addService("gone", metro, "")
	h.eventually("Service gone has its address", func() (bool, string) {
		ip, why := h.serviceIP("gone")
		return ip != "", why
	})

	h.emu.SetFault(emulator.AllRoutes, emulator.Fault{ResetShare: 1})
	h.addService("web", metro, "")
	if err := h.kube.CoreV1().Services("default").Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(77 * time.Second)
	if ip, _ := h.serviceIP("web"); ip != "" {
		t.Fatalf("Service web got %s with the API down", ip)
	}
	// The premise: the controller has failed the Service at least four
	// times, so its next retry is at least 40 s away (80 s after five).
	if n := h.failedSyncs("web"); n < 4 {
		t.Fatalf("the service controller failed Service web %d times in 77 s, want 4 or more: the test's premise (its backoff has grown) does not hold", n)
	}
	h.emu.ClearFaults()
	back := time.Now()
	h.eventually("Service web has its address once the API answers", func() (bool, string) {
		ip, why := h.serviceIP("web")
		return ip != "", why
	})
	t.Logf("Service web had its address %s after the API answered again (%d failed syncs before)", time.Since(back).Round(100*time.Millisecond), h.failedSyncs("web"))
	tags := eip.Tags(h.clusterID(), "default", "gone")
	h.eventually("Service gone's Elastic IP released", func() (bool, string) {
		n := len(h.emu.Reservations(emulator.DefaultProjectID, tags...))
		return n == 0, fmt.Sprintf("%d reservations left", n)
	})
}

// failedSyncs is how many times the service controller reported a failed
// sync of Service name (its SyncLoadBalancerFailed Event's count).
func (h *harness) failedSyncs(name string) int32 {
	h.t.Helper()
	list, err := h.kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		h.t.Fatal(err)
	}
	var n int32
	for _, e := range list.Items {
		if e.Reason == "SyncLoadBalancerFailed" && e.Type == v1.EventTypeWarning {
			n += max(e.Count, 1)
		}
	}
	return n
}
