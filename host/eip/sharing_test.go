package eip

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// shareSvc is a Service of key "k" with the given ports ("TCP/80"), policy
// and selector, created at minute age.
func shareSvc(name string, minute int, policy v1.ServiceExternalTrafficPolicy, selector map[string]string, ports ...string) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{lbsnapshot.SharingAnnotation: "k"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC))},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy, Selector: selector},
	}
	for _, p := range ports {
		proto, num, _ := strings.Cut(p, "/")
		var n int32
		for _, c := range num {
			n = n*10 + int32(c-'0')
		}
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Protocol: v1.Protocol(proto), Port: n})
	}
	return s
}

func TestClash(t *testing.T) {
	app := map[string]string{"app": "dns"}
	other := map[string]string{"app": "web"}
	const cluster, local = v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal
	for _, tc := range []struct {
		name string
		a, b *v1.Service
		want string // a part of the reason; "" = compatible
	}{
		{"TCP and UDP on one port", shareSvc("a", 0, cluster, app, "TCP/53"), shareSvc("b", 1, cluster, app, "UDP/53"), ""},
		{"different ports", shareSvc("a", 0, cluster, app, "TCP/80"), shareSvc("b", 1, cluster, other, "TCP/443"), ""},
		{"same port and protocol", shareSvc("a", 0, cluster, app, "TCP/80", "TCP/443"), shareSvc("b", 1, cluster, app, "TCP/443"), "both use port TCP/443"},
		{"empty protocol is TCP", shareSvc("a", 0, cluster, app, "/80"), shareSvc("b", 1, cluster, app, "TCP/80"), "both use port TCP/80"},
		{"empty policy is Cluster", shareSvc("a", 0, "", app, "TCP/80"), shareSvc("b", 1, cluster, other, "TCP/81"), ""},
		{"Cluster and Local", shareSvc("a", 0, cluster, app, "TCP/80"), shareSvc("b", 1, local, app, "TCP/81"), "externalTrafficPolicy differs (default/a has Cluster, default/b has Local)"},
		{"Local, same selector", shareSvc("a", 0, local, app, "TCP/80"), shareSvc("b", 1, local, map[string]string{"app": "dns"}, "UDP/80"), ""},
		{"Local, other selector", shareSvc("a", 0, local, app, "TCP/80"), shareSvc("b", 1, local, other, "TCP/81"), `different selectors (default/a has "app=dns", default/b has "app=web")`},
		// MetalLB's backend key of a Local Service without selector is
		// empty, like Cluster's: MetalLB lets them share, so the CCM does.
		{"Local without selector and Cluster", shareSvc("a", 0, local, nil, "TCP/80"), shareSvc("b", 1, cluster, app, "TCP/81"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Clash(tc.a, tc.b)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Clash = %q, want %q", got, tc.want)
			}
			if rev := Clash(tc.b, tc.a); (rev == "") != (got == "") {
				t.Fatalf("Clash is not symmetric: %q vs %q", got, rev)
			}
		})
	}
}

func TestGroup(t *testing.T) {
	const cluster = v1.ServiceExternalTrafficPolicyCluster
	withIP := func(s *v1.Service, ip string) *v1.Service {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
		return s
	}
	for _, tc := range []struct {
		name     string
		services []*v1.Service
		address  string
		admitted []string
		refused  []string // "<refused> by <other>"
	}{
		{"three compatible", []*v1.Service{
			shareSvc("c", 2, cluster, nil, "TCP/443"), shareSvc("a", 0, cluster, nil, "TCP/80"), shareSvc("b", 1, cluster, nil, "UDP/53"),
		}, "", []string{"a", "b", "c"}, nil},
		{"the older wins a clash", []*v1.Service{
			shareSvc("new", 5, cluster, nil, "TCP/80"), shareSvc("old", 1, cluster, nil, "TCP/80"),
		}, "", []string{"old"}, []string{"new by old"}},
		{"same age: by name", []*v1.Service{
			shareSvc("y", 1, cluster, nil, "TCP/80"), shareSvc("x", 1, cluster, nil, "TCP/80"),
		}, "", []string{"x"}, []string{"y by x"}},
		{"the holder of the address wins over an older newcomer", []*v1.Service{
			shareSvc("old", 1, cluster, nil, "TCP/80"), withIP(shareSvc("holder", 5, cluster, nil, "TCP/80"), "147.75.0.1"),
		}, "147.75.0.1", []string{"holder"}, []string{"old by holder"}},
		{"another address is not holding", []*v1.Service{
			shareSvc("old", 1, cluster, nil, "TCP/80"), withIP(shareSvc("elsewhere", 5, cluster, nil, "TCP/80"), "147.75.0.9"),
		}, "147.75.0.1", []string{"old"}, []string{"elsewhere by old"}},
		{"a refused one blocks nobody", []*v1.Service{
			shareSvc("a", 0, cluster, nil, "TCP/80"), shareSvc("b", 1, cluster, nil, "TCP/80", "TCP/443"), shareSvc("c", 2, cluster, nil, "TCP/443"),
		}, "", []string{"a", "c"}, []string{"b by a"}},
		{"policy mix", []*v1.Service{
			shareSvc("a", 0, cluster, nil, "TCP/80"), shareSvc("b", 1, v1.ServiceExternalTrafficPolicyLocal, map[string]string{"app": "x"}, "TCP/81"),
		}, "", []string{"a"}, []string{"b by a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.services)
			admitted, refused := group(tc.services, tc.address)
			var gotA, gotR []string
			for _, s := range admitted {
				gotA = append(gotA, s.Name)
			}
			for _, r := range refused {
				gotR = append(gotR, strings.TrimPrefix(r.Service, "default/")+" by "+strings.TrimPrefix(r.Other, "default/"))
				if !strings.Contains(r.Error(), r.Service) || !strings.Contains(r.Error(), r.Other) {
					t.Errorf("the refusal %q does not name both Services", r.Error())
				}
			}
			slices.Sort(gotA)
			if !slices.Equal(gotA, tc.admitted) || !slices.Equal(gotR, tc.refused) {
				t.Fatalf("admitted %v refused %v, want %v and %v", gotA, gotR, tc.admitted, tc.refused)
			}
			if !slices.Equal(before, tc.services) {
				t.Fatal("Group reordered its input")
			}
		})
	}
}

func TestOwnerTags(t *testing.T) {
	// base64(sha256("dns")), computed outside Go.
	if got, want := sharingTag("dns"), "sharing-key=3XWp1vswnEOZ/kJc1fkP+V66E11pJPuRdm7l03JrFoo="; got != want {
		t.Fatalf("SharingTag = %s, want %s", got, want)
	}
	lb := func(ann map[string]string, typ v1.ServiceType, class *string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Annotations: ann},
			Spec: v1.ServiceSpec{Type: typ, LoadBalancerClass: class}}
	}
	own := ServiceTag("ns", "a")
	class := "other"
	for _, tc := range []struct {
		name string
		svc  *v1.Service
		want []string
	}{
		{"unshared", lb(nil, v1.ServiceTypeLoadBalancer, nil), []string{own}},
		{"shared", lb(map[string]string{lbsnapshot.LegacySharingAnnotation: "dns"}, v1.ServiceTypeLoadBalancer, nil), []string{own, sharingTag("dns")}},
		{"not a load balancer", lb(map[string]string{lbsnapshot.SharingAnnotation: "dns"}, v1.ServiceTypeClusterIP, nil), nil},
		{"another load balancer's", lb(map[string]string{lbsnapshot.SharingAnnotation: "dns"}, v1.ServiceTypeLoadBalancer, &class), []string{own}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownerTags(tc.svc); !slices.Equal(got, tc.want) {
				t.Fatalf("OwnerTags = %v, want %v", got, tc.want)
			}
		})
	}
	for tags, want := range map[string]string{
		UsageTag + "," + own + ",cluster=x":               own,
		UsageTag + "," + sharingTag("dns") + ",cluster=x": sharingTag("dns"),
		"cp-eip,cluster=x":                                "",
	} {
		if got := OwnerTag(strings.Split(tags, ",")); got != want {
			t.Errorf("OwnerTag(%s) = %q, want %q", tags, got, want)
		}
	}
}

// TestKeepersAndGroup: who keeps a key's reservation (every other Service of
// the key, refused or not, unless being deleted) and who is weighed for its
// address (also not those bringing another address of their own).
func TestKeepersAndGroup(t *testing.T) {
	const cluster = v1.ServiceExternalTrafficPolicyCluster
	mk := func(name, key string, change func(*v1.Service)) *v1.Service {
		s := shareSvc(name, 0, cluster, nil, "TCP/80")
		s.UID = types.UID("uid-" + name)
		s.Annotations = map[string]string{lbsnapshot.LegacySharingAnnotation: key}
		if change != nil {
			change(s)
		}
		return s
	}
	now := metav1.Now()
	class := "other"
	self := mk("self", "k", nil)
	all := []*v1.Service{
		self,
		mk("peer", "k", nil),
		mk("other-key", "x", nil),
		mk("deleting", "k", func(s *v1.Service) { s.DeletionTimestamp = &now }),
		mk("cluster-ip", "k", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }),
		mk("byo-elsewhere", "k", func(s *v1.Service) { s.Spec.LoadBalancerIP = "145.40.1.1" }),
		mk("byo-same", "k", func(s *v1.Service) { s.Spec.LoadBalancerIP = "147.75.0.1" }),
		mk("classed", "k", func(s *v1.Service) { s.Spec.LoadBalancerClass = &class }),
	}
	keepers := keepersOf(all, sharingTag("k"), self.UID)
	if want := []string{"default/byo-elsewhere", "default/byo-same", "default/peer"}; !slices.Equal(keepers, want) {
		t.Errorf("keepersOf = %v, want %v", keepers, want)
	}
	var group []string
	for _, s := range keyGroup(all, self, "k", "147.75.0.1") {
		group = append(group, s.Name)
	}
	if want := []string{"self", "peer", "byo-same"}; !slices.Equal(group, want) {
		t.Errorf("keyGroup = %v, want %v", group, want)
	}
}

// BenchmarkGroup: the cost of deciding a key's Services at each Ensure of
// one of them (every pair is compared once).
func BenchmarkGroup(b *testing.B) {
	for _, n := range []int{3, 100, 1000} {
		services := make([]*v1.Service, n)
		for i := range services {
			services[i] = shareSvc("s"+strings.Repeat("x", i%7), i%60, v1.ServiceExternalTrafficPolicyCluster, nil, "TCP/"+itoa(1000+i))
			services[i].Name += itoa(i)
		}
		b.Run(itoa(n), func(b *testing.B) {
			for b.Loop() {
				if admitted, _ := group(services, ""); len(admitted) != n {
					b.Fatalf("%d admitted", len(admitted))
				}
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
