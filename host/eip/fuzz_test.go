package eip

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// fuzzService is a Service of type LoadBalancer with the fields a user
// writes that host/eip parses: spec.loadBalancerIP, spec.ipFamilies (comma
// separated), metallb.io/loadBalancerIPs and the two sharing annotations.
// The bits of who say which are present and which the CCM wrote (its
// managedFields): 1 spec.loadBalancerIP, 2 metallb.io/loadBalancerIPs,
// 4 the sharing annotation is present, 8 the legacy one is.
func fuzzService(lbIP, lbIPs, families, sharing, legacy string, who uint8) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1", Annotations: map[string]string{}},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerIP: lbIP},
	}
	if families != "" {
		for _, f := range strings.Split(families, ",") {
			svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, v1.IPFamily(f))
		}
	}
	if lbIPs != "" {
		svc.Annotations[AnnotationLoadBalancerIPs] = lbIPs
	}
	if who&4 != 0 {
		svc.Annotations[lbsnapshot.SharingAnnotation] = sharing
	}
	if who&8 != 0 {
		svc.Annotations[lbsnapshot.LegacySharingAnnotation] = legacy
	}
	var fields []string
	if who&1 != 0 {
		fields = append(fields, `"f:spec":{"f:loadBalancerIP":{}}`)
	}
	if who&2 != 0 {
		fields = append(fields, `"f:metadata":{"f:annotations":{"f:`+AnnotationLoadBalancerIPs+`":{}}}`)
	}
	if len(fields) > 0 {
		svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1("{" + strings.Join(fields, ",") + "}")}}
	}
	return svc
}

// FuzzServiceAddresses fuzzes what host/eip reads from a Service's
// address fields and annotations: the families it gets an Elastic IP of,
// the check of the user's spec.loadBalancerIP, the address the CCM wrote
// (ccmAddress, in each family's view), the addresses it has (previous) and
// its sharing key's tags. Nothing panics; the families are IPv4 and IPv6
// only, each once, in spec order; a refused spec.loadBalancerIP is refused
// in one line naming the field, an accepted one is an address; the CCM's
// address of a family view is of that family (unless it is the field the
// CCM wrote); the owner tags are the Service's and its key's, and the key
// is MetalLB's.
func FuzzServiceAddresses(f *testing.F) {
	for _, s := range []struct {
		lbIP, lbIPs, families, sharing, legacy string
		who                                    uint8
	}{
		{"", "", "", "", "", 0},
		{"145.40.1.5", "", "IPv4", "", "", 1},
		{"145.40.1.5", "", "IPv4", "dns", "", 4},
		{"", "145.40.1.5,2604:1380::1", "IPv4,IPv6", "", "", 2},
		{"", " 2604:1380::1 , 145.40.1.5 ", "IPv6,IPv4,IPv6", "k", "old", 2 | 4 | 8},
		{"2604:1380::1", "", "IPv4", "", "legacy-key", 8},
		{"::ffff:145.40.1.5", "", "IPv4", "", "", 0},
		{"fe80::1%eth0", "fe80::1%eth0", "IPv6", "", "", 2},
		{"ff02::1%a\nb", "", "IPv6", "", "", 0},
		{"0.0.0.0", "", "", "", "", 0},
		{"not an ip", ",,", "IPv5,", "", "", 1 | 2},
	} {
		f.Add(s.lbIP, s.lbIPs, s.families, s.sharing, s.legacy, s.who)
	}
	f.Fuzz(func(t *testing.T, lbIP, lbIPs, fams, sharing, legacy string, who uint8) {
		svc := fuzzService(lbIP, lbIPs, fams, sharing, legacy, who)

		got := families(svc)
		if len(got) == 0 {
			t.Fatalf("spec.ipFamilies %q: no family", svc.Spec.IPFamilies)
		}
		for i, fam := range got {
			if fam != v1.IPv4Protocol && fam != v1.IPv6Protocol || slices.Contains(got[:i], fam) {
				t.Fatalf("spec.ipFamilies %q: families %q", svc.Spec.IPFamilies, got)
			}
		}
		if got[0] != v1.IPv4Protocol || len(got) > 1 {
			if !slices.Contains(svc.Spec.IPFamilies, got[0]) {
				t.Fatalf("spec.ipFamilies %q: families %q", svc.Spec.IPFamilies, got)
			}
		}
		if err := checkLoadBalancerIPFamily(svc, got); err != nil {
			checkFieldError(t, err, "spec.loadBalancerIP")
		}

		if lbIP != "" {
			if err := checkRequestedIP(lbIP); err != nil {
				checkFieldError(t, err, "spec.loadBalancerIP")
			} else if familyOf(lbIP) == "" {
				t.Fatalf("spec.loadBalancerIP %q is accepted but has no family", lbIP)
			}
		}

		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			view := &Manager{family: fam}
			got := view.ccmAddress(forFamily(svc, fam))
			switch {
			case got == "":
			case got == lbIP && who&1 != 0:
			case familyOf(got) != fam:
				t.Fatalf("the %s view's address %q is of family %q", fam, got, familyOf(got))
			case who&2 == 0 || !slices.ContainsFunc(strings.Split(lbIPs, ","), func(s string) bool { return strings.TrimSpace(s) == got }):
				t.Fatalf("the %s view's address %q is not the CCM's", fam, got)
			}
		}

		prev := previous(svc)
		for i, ip := range prev {
			if ip == "" || slices.Contains(prev[:i], ip) {
				t.Fatalf("previous %q", prev)
			}
		}

		key := lbsnapshot.SharingKey(svc)
		switch {
		case who&4 != 0 && key != sharing, who&4 == 0 && who&8 != 0 && key != legacy, who&12 == 0 && key != "":
			t.Fatalf("sharing %q, legacy %q (bits %b): key %q", sharing, legacy, who, key)
		}
		tags := ownerTags(svc)
		if len(tags) == 0 || tags[0] != ServiceTag(svc.Namespace, svc.Name) || (key != "") != (len(tags) == 2) {
			t.Fatalf("key %q: owner tags %q", key, tags)
		}
		if key != "" {
			if tags[1] != sharingTag(key) || OwnerTag(SharedTags("cluster", key)) != tags[1] || !strings.HasPrefix(tags[1], sharingTagPrefix) {
				t.Fatalf("key %q: owner tags %q, shared tags %q", key, tags, SharedTags("cluster", key))
			}
		}
	})
}

// checkFieldError: err names the field, on one line (it becomes an Event).
func checkFieldError(t *testing.T, err error, field string) {
	t.Helper()
	if msg := err.Error(); !strings.Contains(msg, field) || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("error does not name %s on one line: %q", field, msg)
	}
}
