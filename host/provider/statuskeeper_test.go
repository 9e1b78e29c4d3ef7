package provider

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestStatusKept: another controller that changes or empties the status of
// a Service the CCM serves (MetalLB's, still installed during a switch to
// kube-vip, empties it) gets it put back (after 10 s), with an Event naming
// it; one that keeps doing so is not fought, and the user is told.
func TestStatusKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, harnessOptions{})
	h.addNode("node-0", nil)
	h.addService("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h.addService("api", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	var webIP, apiIP string
	h.eventually("both Services have addresses", func() (bool, string) {
		var msg string
		webIP, msg = h.serviceIP("web")
		apiIP, _ = h.serviceIP("api")
		return webIP != "" && apiIP != "", msg
	})
	overwrite := func(name, manager, patch string) {
		t.Helper()
		if _, err := h.kube.CoreV1().Services("default").Patch(ctx, name, types.MergePatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: manager}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	restored := func(name, ip, by string) {
		t.Helper()
		h.eventually(name+"'s status restored", func() (bool, string) {
			got, msg := h.serviceIP(name)
			ev := h.events(name)
			return got == ip && strings.Contains(ev, reasonStatusRestored+": Restored the load-balancer status ("+ip+"), which "+by), got + " " + msg + " " + ev
		})
	}

	// A wrong address, by a writer the Event names.
	overwrite("web", "metallb-controller", `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.99"}]}}}`)
	restored("web", webIP, "metallb-controller had changed to 192.0.2.99")
	// Emptied, as MetalLB does for an address in none of its pools.
	overwrite("api", "metallb-controller", `{"status":{"loadBalancer":{"ingress":null}}}`)
	restored("api", apiIP, "")

	// Again, at once: the CCM does not fight; it says so.
	overwrite("web", "metallb-controller", `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.98"}]}}}`)
	h.eventually("a Warning that the status was changed again", func() (bool, string) {
		ev := h.events("web")
		return strings.Contains(ev, reasonStatusOverwritten+": The load-balancer status was changed again (by metallb-controller)"), ev
	})
	if got, _ := h.serviceIP("web"); got != "192.0.2.98" {
		t.Errorf("web's status is %q: the CCM wrote it back within the fight window", got)
	}
	h.checkRBAC()
}
