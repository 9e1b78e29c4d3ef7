package eip

import (
	"testing"

	v1 "k8s.io/api/core/v1"
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
			s := svc("web", map[string]string{SharingAnnotation: "k"}, "145.40.1.5")
			s.Spec.Type, s.Spec.LoadBalancerClass = tc.typ, tc.class
			if got := WantsLoadBalancer(s); got != tc.want {
				t.Fatalf("WantsLoadBalancer(%s, class %v) = %v, want %v", tc.typ, tc.class, got, tc.want)
			}
		})
	}
}
