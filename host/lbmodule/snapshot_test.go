package lbmodule_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestServiceFromK8s(t *testing.T) {
	lb := func(ip string, ingress ...string) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u", Annotations: map[string]string{lbmodule.SharingAnnotation: "k"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: ip,
				Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443}}},
		}
		for _, in := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in})
		}
		return s
	}
	want := func(ips ...string) sdk.Service {
		return sdk.Service{Namespace: "ns", Name: "web", UID: "u", IPs: ips, SharingKey: "k",
			Ports: []sdk.Port{{Name: "https", Protocol: "TCP", Port: 443}}, Annotations: map[string]string{lbmodule.SharingAnnotation: "k"}}
	}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want sdk.Service
		ok   bool
	}{
		{"ingress wins", lb("145.40.1.9", "145.40.1.5"), want("145.40.1.5"), true},
		{"loadBalancerIP", lb("145.40.1.9"), want("145.40.1.9"), true},
		{"no address", lb(""), sdk.Service{}, false},
		{"hostname ingress only", lb("", ""), sdk.Service{}, false},
		{"not a LoadBalancer", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}, sdk.Service{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := lbmodule.ServiceFromK8s(tc.svc)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
