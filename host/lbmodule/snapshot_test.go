package lbmodule_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestServiceFromK8s(t *testing.T) {
	lb := func(ip string, ingress ...string) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u", Annotations: map[string]string{eip.LegacySharingAnnotation: "k"}},
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
			Ports: []sdk.Port{{Name: "https", Protocol: "TCP", Port: 443}}, Annotations: map[string]string{eip.LegacySharingAnnotation: "k"}}
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

func TestSourceFor(t *testing.T) {
	for _, tc := range []struct {
		url     string
		builtin string
		path    string
		opts    sdk.Options
	}{
		{"metallb:///", "metallb-crd", "", sdk.Options{Namespace: "metallb-system"}},
		{"metallb:///lb?crdConfiguration=true&x=y", "metallb-crd", "", sdk.Options{Namespace: "lb", Params: map[string]string{"x": "y"}}},
		{"metallb:///lb/cfg", "metallb-configmap", "", sdk.Options{Namespace: "lb", ConfigMap: "cfg"}},
		{"metallb:///lb?crdConfiguration=false", "metallb-configmap", "", sdk.Options{Namespace: "lb", ConfigMap: "config"}},
		{"kube-vip://", "kube-vip", "", sdk.Options{}},
		{"empty://", "empty", "", sdk.Options{}},
		{"wasm:///m/mine.wasm?sha256=" + strings.Repeat("a", 64) + "&k=v", "", "/m/mine.wasm", sdk.Options{Params: map[string]string{"k": "v"}}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			lb, err := config.ParseLoadBalancer(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			builtin, path, o, err := lbmodule.SourceFor(lb)
			if err != nil || builtin != tc.builtin || path != tc.path || !reflect.DeepEqual(o, tc.opts) {
				t.Errorf("got %q %q %+v %v, want %q %q %+v", builtin, path, o, err, tc.builtin, tc.path, tc.opts)
			}
		})
	}
}
