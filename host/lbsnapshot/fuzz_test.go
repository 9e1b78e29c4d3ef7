package lbsnapshot

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// FuzzServiceFromK8s fuzzes the module's view of a Service: its addresses
// from the status, spec.loadBalancerIP, metallb.io/loadBalancerIPs (comma
// separated) or the caller's own address, and its sharing key from the two
// sharing annotations. The bits of who: 1 the CCM wrote
// spec.loadBalancerIP, 2 it wrote metallb.io/loadBalancerIPs, 4 the sharing
// annotation is present, 8 the legacy one is. Nothing panics; the
// addresses are plain (sdk.Service.IPs: canonical, no zone), each once,
// IPv4 before IPv6, in order; the sharing key is MetalLB's.
func FuzzServiceFromK8s(f *testing.F) {
	for _, s := range []struct {
		status, lbIP, lbIPs, own, sharing, legacy string
		who                                       uint8
	}{
		{"145.40.1.5", "", "", "", "", "", 0},
		{"", "145.40.1.5", "", "", "", "", 1},
		{"", "", "2604:1380::1, 145.40.1.5", "", "dns", "", 2 | 4},
		{"2604:1380:0::1,145.40.1.5,145.40.1.5", "", "", "", "", "old", 8},
		{"", "", "", "10.0.0.1", "", "", 4},
		{"", "", "fe80::1%eth0,::ffff:145.40.1.5", "", "", "", 2},
		{"", "not an ip", ",,", "", "", "", 1 | 2},
	} {
		f.Add(s.status, s.lbIP, s.lbIPs, s.own, s.sharing, s.legacy, s.who)
	}
	f.Fuzz(func(t *testing.T, status, lbIP, lbIPs, own, sharing, legacy string, who uint8) {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1", Annotations: map[string]string{}},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerIP: lbIP},
		}
		if status != "" {
			for _, ip := range strings.Split(status, ",") {
				svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
			}
		}
		if lbIPs != "" {
			svc.Annotations[fieldmanager.AnnotationLoadBalancerIPs] = lbIPs
		}
		if who&4 != 0 {
			svc.Annotations[SharingAnnotation] = sharing
		}
		if who&8 != 0 {
			svc.Annotations[LegacySharingAnnotation] = legacy
		}
		var fields []string
		if who&1 != 0 {
			fields = append(fields, `"f:spec":{"f:loadBalancerIP":{}}`)
		}
		if who&2 != 0 {
			fields = append(fields, `"f:metadata":{"f:annotations":{"f:`+fieldmanager.AnnotationLoadBalancerIPs+`":{}}}`)
		}
		if len(fields) > 0 {
			svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationApply,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1("{" + strings.Join(fields, ",") + "}")}}
		}

		s, ok := serviceFromK8s(svc, own)
		if !ok {
			if s.Name != "" || len(s.IPs) > 0 {
				t.Fatalf("not ok, yet %+v", s)
			}
			return
		}
		if len(s.IPs) == 0 || s.Namespace != "shop" || s.Name != "web" {
			t.Fatalf("ok with %+v", s)
		}
		for i, ip := range s.IPs {
			a, err := netip.ParseAddr(ip)
			if err != nil || a.String() != ip || a.Zone() != "" || slices.Contains(s.IPs[:i], ip) {
				t.Fatalf("addresses %q: %q is not a plain address, or twice", s.IPs, ip)
			}
			if i > 0 && sdk.IsIPv6(s.IPs[i-1]) && !sdk.IsIPv6(ip) {
				t.Fatalf("addresses %q: IPv6 before IPv4", s.IPs)
			}
		}
		if s.SharingKey != SharingKey(svc) {
			t.Fatalf("sharing key %q, want %q", s.SharingKey, SharingKey(svc))
		}
	})
}
