package controlplane

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func kubernetesService(port int32, target intstr.IntOrString) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{
			Name: "https", Protocol: v1.ProtocolTCP, Port: port, TargetPort: target,
		}}},
	}
}

func kubernetesSlice(ns, name, svc string, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(port)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func TestAPIServerTargetPort(t *testing.T) {
	tests := []struct {
		name    string
		svc     *v1.Service
		slices  []*discoveryv1.EndpointSlice
		want    int
		wantErr string
	}{
		{"numeric targetPort", kubernetesService(443, intstr.FromInt32(6443)), nil, 6443, ""},
		{"named targetPort falls back to the EndpointSlice port", kubernetesService(443, intstr.FromString("https")),
			[]*discoveryv1.EndpointSlice{kubernetesSlice("default", "kubernetes", "kubernetes", 6444, "10.0.0.1")}, 6444, ""},
		{"no targetPort and no slices falls back to port", kubernetesService(443, intstr.IntOrString{}), nil, 443, ""},
		{"missing Service", nil, nil, 0, "default/kubernetes does not exist"},
		{"no ports", &v1.Service{}, nil, 0, "has no ports"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := apiServerTargetPort(tc.svc, tc.slices)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// jsonEqual compares an apply configuration with the JSON a reader of the
// seed README would write down for it.
func jsonEqual(t *testing.T, got any, want string) {
	t.Helper()
	gb, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	gn, _ := json.Marshal(g)
	wn, _ := json.Marshal(w)
	if string(gn) != string(wn) {
		t.Fatalf("got  %s\nwant %s", gn, wn)
	}
}

func TestExternalService(t *testing.T) {
	src := kubernetesService(443, intstr.FromInt32(6443))
	tests := []struct {
		name          string
		apiServerPort int
		wantPort      int
	}{
		{"apiServerPort 0 uses the apiserver's targetPort", 0, 6443},
		{"apiServerPort overrides the port, targetPort stays", 443, 443},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jsonEqual(t, externalService("147.75.1.2", src, 6443, tc.apiServerPort), `{
				"kind": "Service", "apiVersion": "v1",
				"metadata": {
					"name": "cloud-provider-equinix-metal-kubernetes-external", "namespace": "kube-system",
					"labels": {"endpointslice.kubernetes.io/managed-by": "cloud-provider-equinix-metal"},
					"annotations": {"metallb.universe.tf/address-pool": "disabled-metallb-do-not-use-any-address-pool"}
				},
				"spec": {
					"type": "LoadBalancer", "loadBalancerIP": "147.75.1.2",
					"loadBalancerClass": "metal.equinix.com/control-plane-eip",
					"ports": [{"name": "https", "protocol": "TCP", "port": `+itoa(tc.wantPort)+`, "targetPort": 6443}]
				}
			}`)
		})
	}
	jsonEqual(t, externalServiceStatus("147.75.1.2"), `{
		"kind": "Service", "apiVersion": "v1",
		"metadata": {"name": "cloud-provider-equinix-metal-kubernetes-external", "namespace": "kube-system"},
		"status": {"loadBalancer": {"ingress": [{"ip": "147.75.1.2"}]}}
	}`)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestMirrorSlices(t *testing.T) {
	src := []*discoveryv1.EndpointSlice{
		kubernetesSlice("default", "kubernetes", "kubernetes", 6443, "10.0.0.1", "10.0.0.2"),
		// Upstream mirrored these two as well (its filter used && for ||).
		kubernetesSlice("default", "web-abcde", "web", 8080, "10.1.0.1"),
		kubernetesSlice("other", "kubernetes", "kubernetes", 9999, "10.2.0.1"),
	}
	got := mirrorSlices(src, "uid-1")
	if len(got) != 1 {
		t.Fatalf("mirrored %d slices, want only the default/kubernetes one", len(got))
	}
	jsonEqual(t, got[0], `{
		"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
		"metadata": {
			"name": "cloud-provider-equinix-metal-kubernetes-external", "namespace": "kube-system",
			"labels": {
				"kubernetes.io/service-name": "cloud-provider-equinix-metal-kubernetes-external",
				"endpointslice.kubernetes.io/managed-by": "cloud-provider-equinix-metal"
			},
			"ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "cloud-provider-equinix-metal-kubernetes-external", "uid": "uid-1"}]
		},
		"addressType": "IPv4",
		"endpoints": [
			{"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
			{"addresses": ["10.0.0.2"], "conditions": {"ready": true}}
		],
		"ports": [{"name": "https", "protocol": "TCP", "port": 6443}]
	}`)

	if n := mirrorSliceName("kubernetes-v6"); n != "cloud-provider-equinix-metal-kubernetes-external-kubernetes-v6" {
		t.Errorf("mirrorSliceName(kubernetes-v6) = %q", n)
	}
}

func TestNeedsRecreate(t *testing.T) {
	ours, other := loadBalancerClass, "example.com/other"
	tests := []struct {
		name string
		svc  *v1.Service
		want string
	}{
		{"absent", nil, ""},
		{"ours", &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerClass: &ours}}, ""},
		{"upstream's, without a class", &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}},
			"its spec.loadBalancerClass is none, want metal.equinix.com/control-plane-eip, and the field cannot be changed on an existing Service"},
		{"another class", &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerClass: &other}},
			"its spec.loadBalancerClass is example.com/other, want"},
		// Not a LoadBalancer: the apply may set type and class together.
		{"ClusterIP without a class", &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP}}, ""},
	}
	for _, tc := range tests {
		if got := needsRecreate(tc.svc); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
