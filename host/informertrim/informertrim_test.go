package informertrim_test

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/informertrim"
)

func entry(manager string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:loadBalancerIP":{}}}`)}}
}

func TestTransform(t *testing.T) {
	meta := func(managers ...string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: "x", Namespace: "ns", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}}
		for _, name := range managers {
			m.ManagedFields = append(m.ManagedFields, entry(name))
		}
		return m
	}
	images := []v1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}}
	addresses := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}
	cases := []struct {
		name    string
		in, out any
	}{
		{"a Service keeps only the CCM's entries",
			&v1.Service{ObjectMeta: meta("kubectl", fieldmanager.CCM, "kube-controller-manager"), Spec: v1.ServiceSpec{LoadBalancerIP: "1.2.3.4"}},
			&v1.Service{ObjectMeta: meta(fieldmanager.CCM), Spec: v1.ServiceSpec{LoadBalancerIP: "1.2.3.4"}}},
		{"a Service no CCM wrote has none",
			&v1.Service{ObjectMeta: meta("kubectl")},
			&v1.Service{ObjectMeta: meta()}},
		{"a Node drops managedFields and images, keeps the rest",
			&v1.Node{ObjectMeta: meta("kubelet", fieldmanager.CCM), Spec: v1.NodeSpec{ProviderID: "equinixmetal://x"},
				Status: v1.NodeStatus{Images: images, Addresses: addresses}},
			&v1.Node{ObjectMeta: meta(), Spec: v1.NodeSpec{ProviderID: "equinixmetal://x"}, Status: v1.NodeStatus{Addresses: addresses}}},
		{"another kind is unchanged",
			&v1.ConfigMap{ObjectMeta: meta("kubectl")},
			&v1.ConfigMap{ObjectMeta: meta("kubectl")}},
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
