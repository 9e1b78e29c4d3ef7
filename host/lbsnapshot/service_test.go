package lbsnapshot_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestServiceFromK8s(t *testing.T) {
	lb := func(ip string, ingress ...string) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u", Annotations: map[string]string{lbsnapshot.LegacySharingAnnotation: "k"}},
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
			Ports: []sdk.Port{{Name: "https", Protocol: "TCP", Port: 443}}, Annotations: map[string]string{lbsnapshot.LegacySharingAnnotation: "k"}}
	}
	with := func(s *corev1.Service, f func(*corev1.Service)) *corev1.Service { f(s); return s }
	// ccmWrote marks spec.loadBalancerIP as the CCM's (its field manager).
	ccmWrote := func(s *corev1.Service) {
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:loadBalancerIP":{}}}`)}}
	}
	// ccmWroteIPs gives the Service the annotation where the CCM records an
	// IPv6 or dual-stack Service's Elastic IPs, as the CCM's; byUser as
	// someone else's.
	ips := func(owner string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations[fieldmanager.AnnotationLoadBalancerIPs] = "2604:1380:4641::5, 145.40.1.5"
			s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: owner, Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:metallb.io/loadBalancerIPs":{}}}}`)}}
		}
	}
	withIPs := func(w sdk.Service) sdk.Service {
		w.Annotations = map[string]string{lbsnapshot.LegacySharingAnnotation: "k", fieldmanager.AnnotationLoadBalancerIPs: "2604:1380:4641::5, 145.40.1.5"}
		return w
	}
	class := "other.io/lb"
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want sdk.Service
		ok   bool
	}{
		{"ingress wins", lb("145.40.1.9", "145.40.1.5"), want("145.40.1.5"), true},
		{"loadBalancerIP the CCM wrote", with(lb("145.40.1.9"), ccmWrote), want("145.40.1.9"), true},
		// The user's own address reaches the module once the CCM has
		// accepted it (an Elastic IP of the project: host/eip), that is
		// once it is in the status; before, or when refused, announcing it
		// would route an address the project may not hold.
		// MetalLB empties the status of a Service whose address is in no
		// pool: the addresses the CCM recorded still make the pool.
		{"loadBalancerIPs the CCM wrote", with(lb(""), ips(fieldmanager.CCM)), withIPs(want("145.40.1.5", "2604:1380:4641::5")), true},
		{"ingress wins over loadBalancerIPs", with(lb("", "145.40.1.7"), ips(fieldmanager.CCM)), withIPs(want("145.40.1.7")), true},
		{"loadBalancerIPs the user wrote", with(lb(""), ips("kubectl")), sdk.Service{}, false},
		{"the user's loadBalancerIP, not in the status", lb("145.40.1.9"), sdk.Service{}, false},
		{"the user's loadBalancerIP, in the status", lb("145.40.1.9", "145.40.1.9"), want("145.40.1.9"), true},
		{"no address", lb(""), sdk.Service{}, false},
		{"hostname ingress only", lb("", ""), sdk.Service{}, false},
		{"not a LoadBalancer", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}, sdk.Service{}, false},
		// Addresses are parsed, written in their canonical form,
		// deduplicated and sorted.
		{"ingress deduplicated and sorted", lb("", "2604:1380:4641:0::5", "145.40.1.5", "145.40.1.5"), want("145.40.1.5", "2604:1380:4641::5"), true},
		// IPv4 before IPv6 whatever their strings, each family in
		// string order (an IPv4-mapped address is IPv4).
		{"IPv4 before IPv6", lb("", "2604:1380:4641::6", "86.109.1.5", "2604:1380:4641::5", "145.40.1.5", "::ffff:9.9.9.9"),
			want("145.40.1.5", "86.109.1.5", "::ffff:9.9.9.9", "2604:1380:4641::5", "2604:1380:4641::6"), true},
		{"unparsable ingress falls back to loadBalancerIP", with(lb("145.40.1.9", "not-an-ip"), ccmWrote), want("145.40.1.9"), true},
		{"unparsable loadBalancerIP", lb("not-an-ip"), sdk.Service{}, false},
		// Which Services reach the module is Build's rule; the view of one
		// does not depend on its class.
		{"another load balancer's", with(lb("", "145.40.1.5"), func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }), want("145.40.1.5"), true},
		{"current sharing annotation wins", with(lb("", "145.40.1.5"), func(s *corev1.Service) { s.Annotations[lbsnapshot.SharingAnnotation] = "dns" }),
			func() sdk.Service {
				w := want("145.40.1.5")
				w.SharingKey, w.Annotations = "dns", map[string]string{lbsnapshot.LegacySharingAnnotation: "k", lbsnapshot.SharingAnnotation: "dns"}
				return w
			}(), true},
		{"no annotations", with(lb("", "145.40.1.5"), func(s *corev1.Service) { s.Annotations = nil }),
			func() sdk.Service { w := want("145.40.1.5"); w.SharingKey, w.Annotations = "", nil; return w }(), true},
		{"ports in order, protocol as given", with(lb("", "145.40.1.5"), func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}, {Port: 8080}}
		}), func() sdk.Service {
			w := want("145.40.1.5")
			w.Ports = []sdk.Port{{Name: "dns", Protocol: "UDP", Port: 53}, {Port: 8080}}
			return w
		}(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := lbsnapshot.ServiceFromK8s(tc.svc)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// The module's view holds a copy of the annotations: nothing the request
// is encoded from aliases the informer's object.
func TestServiceFromK8sCopiesAnnotations(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: map[string]string{"a": "1"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "145.40.1.5"}}}},
	}
	got, ok := lbsnapshot.ServiceFromK8s(svc)
	if !ok {
		t.Fatal("no view of a Service with an address")
	}
	got.Annotations["a"] = "changed"
	if svc.Annotations["a"] != "1" {
		t.Fatalf("the view shares the Service's annotations map")
	}
}

func TestViewChanged(t *testing.T) {
	base := func() *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u", ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}}},
		}
	}
	class := "example.com/other"
	for _, tc := range []struct {
		name   string
		update func(*corev1.Service)
		want   bool
	}{
		{"a new resourceVersion only", func(s *corev1.Service) { s.ResourceVersion = "2" }, false},
		{"the finalizer", func(s *corev1.Service) { s.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"} }, false},
		{"the same address again in the status, with a mode", func(s *corev1.Service) {
			mode := corev1.LoadBalancerIPModeVIP
			s.Status.LoadBalancer.Ingress[0].IPMode = &mode
		}, false},
		{"a condition in the status", func(s *corev1.Service) {
			s.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
		}, false},
		{"the selector", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "web"} }, false},
		{"another address", func(s *corev1.Service) { s.Status.LoadBalancer.Ingress[0].IP = "198.51.100.2" }, true},
		{"the status emptied (the address then comes from nowhere)", func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = nil }, true},
		{"an annotation (modules read them all)", func(s *corev1.Service) {
			s.Annotations = map[string]string{"metallb.io/ip-allocated-from-pool": "ns.web"}
		}, true},
		{"a port", func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 }, true},
		{"spec.loadBalancerIP (a user's own address)", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.51.100.9" }, true}, //nolint:staticcheck // the field Build reads
		{"the traffic policy", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }, true},
		{"a load-balancer class (no longer ours)", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }, true},
		{"another object of the same name", func(s *corev1.Service) { s.UID = "v" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			tc.update(cur)
			if got := lbsnapshot.ViewChanged(old, cur); got != tc.want {
				t.Errorf("ViewChanged = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("a Service of another class, changed", func(t *testing.T) {
		old, cur := base(), base()
		old.Spec.LoadBalancerClass, cur.Spec.LoadBalancerClass = &class, &class
		cur.Spec.Ports[0].Port = 8080
		if lbsnapshot.ViewChanged(old, cur) {
			t.Error("ViewChanged = true for a Service the CCM does not balance")
		}
	})
}
