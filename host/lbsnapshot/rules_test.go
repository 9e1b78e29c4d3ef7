package lbsnapshot

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWantsLoadBalancer: the service controller's rule, and nothing else:
// the type and the class decide, the name, the namespace, a sharing key and
// an address do not.
func TestWantsLoadBalancer(t *testing.T) {
	class := "other.io/lb"
	empty := ""
	for _, tc := range []struct {
		name  string
		typ   v1.ServiceType
		class *string
		want  bool
	}{
		{"LoadBalancer", v1.ServiceTypeLoadBalancer, nil, true},
		{"LoadBalancer of another class", v1.ServiceTypeLoadBalancer, &class, false},
		// An empty class is still a class: the controller only asks
		// whether the field is set.
		{"LoadBalancer with an empty class", v1.ServiceTypeLoadBalancer, &empty, false},
		{"ClusterIP", v1.ServiceTypeClusterIP, nil, false},
		{"NodePort", v1.ServiceTypeNodePort, nil, false},
		{"ExternalName", v1.ServiceTypeExternalName, nil, false},
		{"no type", "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{SharingAnnotation: "k"}},
				Spec:       v1.ServiceSpec{Type: tc.typ, LoadBalancerClass: tc.class, LoadBalancerIP: "145.40.1.5"},
			}
			if got := WantsLoadBalancer(s); got != tc.want {
				t.Fatalf("WantsLoadBalancer(%s, class %v) = %v, want %v", tc.typ, tc.class, got, tc.want)
			}
		})
	}
}

func TestSharingKey(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"none", nil, ""},
		{"current form", map[string]string{SharingAnnotation: "dns"}, "dns"},
		{"older form", map[string]string{LegacySharingAnnotation: "dns"}, "dns"},
		{"current form wins", map[string]string{SharingAnnotation: "a", LegacySharingAnnotation: "b"}, "a"},
		// MetalLB's rule: present-but-empty current form means no sharing.
		{"empty current form wins", map[string]string{SharingAnnotation: "", LegacySharingAnnotation: "b"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if got := SharingKey(s); got != tc.want {
				t.Fatalf("SharingKey = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIsControlPlaneService(t *testing.T) {
	tests := []struct {
		ns, name string
		want     bool
	}{
		{"kube-system", "cloud-provider-equinix-metal-kubernetes-external", true},
		{"default", "cloud-provider-equinix-metal-kubernetes-external", false},
		{"kube-system", "kubernetes", false},
		{"default", "kubernetes", false},
		{"", "", false},
	}
	for _, tc := range tests {
		if got := IsControlPlaneService(tc.ns, tc.name); got != tc.want {
			t.Errorf("IsControlPlaneService(%q, %q) = %v, want %v", tc.ns, tc.name, got, tc.want)
		}
	}
}
