package informertrim_test

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/informertrim"
)

func entry(manager, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

const (
	lbIP      = `{"f:spec":{"f:loadBalancerIP":{}}}`
	finalizer = `{"f:metadata":{"f:finalizers":{"v:\"service.kubernetes.io/load-balancer-cleanup\"":{}}}}`
	ingress   = `{"f:status":{"f:loadBalancer":{"f:ingress":{}}}}`
)

func TestTransform(t *testing.T) {
	meta := func(entries ...metav1.ManagedFieldsEntry) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "x", Namespace: "ns", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}, ManagedFields: entries}
	}
	wrote := metav1.ManagedFieldsEntry{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(lbIP)}}
	images := []v1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}}
	addresses := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}
	cases := []struct {
		name    string
		in, out any
	}{
		{"a Service whose loadBalancerIP the CCM wrote keeps one entry saying so",
			&v1.Service{ObjectMeta: meta(entry("kubectl", lbIP), entry(fieldmanager.CCM, finalizer), entry(fieldmanager.CCM, lbIP), entry(fieldmanager.CCM, ingress)), Spec: v1.ServiceSpec{LoadBalancerIP: "1.2.3.4"}},
			&v1.Service{ObjectMeta: meta(wrote), Spec: v1.ServiceSpec{LoadBalancerIP: "1.2.3.4"}}},
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
