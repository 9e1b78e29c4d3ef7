package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
)

// TestNoAnnouncingNode: a Local Service whose ready endpoint is on a node
// the default BGP selection leaves out (labelled
// exclude-from-external-load-balancers) gets its Elastic IP and one
// NoAnnouncingNode Event naming the address and that node; the endpoint
// moving to a BGP node gives AnnouncingNodeRestored. The EndpointSlice is
// written as kube-controller-manager's would be.
func TestNoAnnouncingNode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	h.addNode("node-0", nil)
	h.addNode("node-1", map[string]string{"node.kubernetes.io/exclude-from-external-load-balancers": "true"})
	h.eventually("node-0 alone gets BGP annotations", func() (bool, string) {
		nodes, err := h.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, n := range nodes.Items {
			if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "" {
				got = append(got, n.Name)
			}
		}
		return fmt.Sprint(got) == "[node-0]", fmt.Sprintf("annotated: %v", got)
	})

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{"metal.equinix.com/eip-metro": "da"}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "web"}, Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	if _, err := h.kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	h.eventually("web gets an Elastic IP", func() (bool, string) {
		var why string
		ip, why = h.serviceIP("web")
		return ip != "", why
	})
	ready, node, port := true, "node-1", int32(8080)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.202.1.5"}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: &port}},
	}
	created, err := h.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("web gets a NoAnnouncingNode Event", func() (bool, string) {
		ev := h.serviceEvents("web", lbmodule.ReasonNoAnnouncingNode)
		if len(ev) == 0 {
			return false, h.events("web")
		}
		if msg := ev[0].Message; !strings.Contains(msg, ip) || !strings.Contains(msg, "node-1") {
			return false, "the Event names neither the address nor the node: " + msg
		}
		return ev[0].Type == v1.EventTypeWarning, ev[0].Type
	})

	// Resyncs of the module do not repeat it.
	if _, err := h.kube.CoreV1().Services("default").Patch(ctx, "web", "application/merge-patch+json", []byte(`{"metadata":{"annotations":{"example.com/touched":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if ev := h.serviceEvents("web", lbmodule.ReasonNoAnnouncingNode); len(ev) != 1 || ev[0].Count > 1 {
		t.Errorf("NoAnnouncingNode %d times, want once", countOf(ev))
	}

	// The pod moves to the BGP node.
	node0 := "node-0"
	created.Endpoints[0].NodeName = &node0
	if _, err := h.kube.DiscoveryV1().EndpointSlices("default").Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("web gets an AnnouncingNodeRestored Event", func() (bool, string) {
		ev := h.serviceEvents("web", lbmodule.ReasonAnnouncingNodeRestored)
		if len(ev) == 0 {
			return false, h.events("web")
		}
		return strings.Contains(ev[0].Message, "node-0"), ev[0].Message
	})
	h.checkRBAC()
}

func ptrTo[T any](v T) *T { return &v }
