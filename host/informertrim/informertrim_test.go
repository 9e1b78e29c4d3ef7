package informertrim_test

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/informertrim"
)

func entry(manager, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: metav1.NewFieldsV1(fields)}
}

const (
	lbIP      = `{"f:spec":{"f:loadBalancerIP":{}}}`
	finalizer = `{"f:metadata":{"f:finalizers":{"v:\"service.kubernetes.io/load-balancer-cleanup\"":{}}}}`
	ingress   = `{"f:status":{"f:loadBalancer":{"f:ingress":{}}}}`
	lbIPs     = `{"f:metadata":{"f:annotations":{"f:metallb.io/loadBalancerIPs":{}}}}`
)

// trimmed is the one entry a trimmed Service keeps.
func trimmed(fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(fields)}
}

func TestTransform(t *testing.T) {
	meta := func(entries ...metav1.ManagedFieldsEntry) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "x", Namespace: "ns", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}, ManagedFields: entries}
	}
	wrote := metav1.ManagedFieldsEntry{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(lbIP)}
	images := []v1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}}
	addresses := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}
	cases := []struct {
		name    string
		in, out any
	}{
		{"a Service whose loadBalancerIP the CCM wrote keeps one entry saying so",
			&v1.Service{ObjectMeta: meta(entry("kubectl", lbIP), entry(fieldmanager.CCM, finalizer), entry(fieldmanager.CCM, lbIP), entry(fieldmanager.CCM, ingress)), Spec: v1.ServiceSpec{LoadBalancerIP: "1.2.3.4"}},
			&v1.Service{ObjectMeta: meta(wrote), Spec: v1.ServiceSpec{LoadBalancerIP: "1.2.3.4"}}},
		{"a Service whose loadBalancerIPs annotation the CCM wrote keeps one entry saying so",
			&v1.Service{ObjectMeta: meta(entry("kubectl", lbIPs), entry(fieldmanager.CCM, lbIPs), entry(fieldmanager.CCM, ingress))},
			&v1.Service{ObjectMeta: meta(trimmed(lbIPs))}},
		{"a Service the CCM wrote both of keeps one entry with both",
			&v1.Service{ObjectMeta: meta(entry(fieldmanager.CCM, lbIP), entry(fieldmanager.CCM, lbIPs))},
			&v1.Service{ObjectMeta: meta(trimmed(`{"f:metadata":{"f:annotations":{"f:metallb.io/loadBalancerIPs":{}}},"f:spec":{"f:loadBalancerIP":{}}}`))}},
		{"a Service the CCM wrote other fields of has none",
			&v1.Service{ObjectMeta: meta(entry("kubectl", lbIP), entry(fieldmanager.CCM, finalizer), entry(fieldmanager.CCM, ingress))},
			&v1.Service{ObjectMeta: meta()}},
		{"a Service no CCM wrote has none",
			&v1.Service{ObjectMeta: meta(entry("kubectl", lbIP))},
			&v1.Service{ObjectMeta: meta()}},
		{"a Node drops managedFields and images, keeps the rest",
			&v1.Node{ObjectMeta: meta(entry("kubelet", finalizer), entry(fieldmanager.CCM, lbIP)), Spec: v1.NodeSpec{ProviderID: "equinixmetal://x"},
				Status: v1.NodeStatus{Images: images, Addresses: addresses}},
			&v1.Node{ObjectMeta: meta(), Spec: v1.NodeSpec{ProviderID: "equinixmetal://x"}, Status: v1.NodeStatus{Addresses: addresses}}},
		{"another kind is unchanged",
			&v1.ConfigMap{ObjectMeta: meta(entry("kubectl", lbIP))},
			&v1.ConfigMap{ObjectMeta: meta(entry("kubectl", lbIP))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := informertrim.Transform(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.out) {
				t.Errorf("got  %+v\nwant %+v", got, c.out)
			}
		})
	}
}

// TestEndpointSlice: an EndpointSlice keeps what the NoAnnouncingNode check
// reads (its Service, and per endpoint the node and whether it is ready),
// nothing else; another object passes unchanged.
func TestEndpointSlice(t *testing.T) {
	ready, node, zone := true, "worker-1", "da11"
	port := int32(80)
	in := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abcde", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels:          map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io", "app": "web"},
			Annotations:     map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z"},
			ManagedFields:   []metav1.ManagedFieldsEntry{entry("kube-controller-manager", `{"f:endpoints":{}}`)},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "web"}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.202.1.5"}, NodeName: &node, Zone: &zone,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready}, TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "web-1"}}},
		Ports: []discoveryv1.EndpointPort{{Port: &port}},
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abcde", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	got, err := informertrim.EndpointSlice(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if got, _ := informertrim.EndpointSlice(cm); got != cm {
		t.Errorf("a ConfigMap changed: %+v", got)
	}
}
