package eip

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

func TestFamiliesOfService(t *testing.T) {
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	for _, tc := range []struct {
		name string
		in   []v1.IPFamily
		want []v1.IPFamily
	}{
		{name: "unset (an apiserver that does not default them)", want: []v1.IPFamily{v4}},
		{name: "IPv4", in: []v1.IPFamily{v4}, want: []v1.IPFamily{v4}},
		{name: "IPv6", in: []v1.IPFamily{v6}, want: []v1.IPFamily{v6}},
		{name: "dual-stack", in: []v1.IPFamily{v4, v6}, want: []v1.IPFamily{v4, v6}},
		{name: "dual-stack, IPv6 first", in: []v1.IPFamily{v6, v4}, want: []v1.IPFamily{v6, v4}},
		{name: "unknown family dropped", in: []v1.IPFamily{"IPv5", v6}, want: []v1.IPFamily{v6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("web", nil, "")
			s.Spec.IPFamilies = tc.in
			if got := families(s); !slices.Equal(got, tc.want) {
				t.Fatalf("Families %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEnsureFamilies: a Service gets one Elastic IP per family of
// spec.ipFamilies, in that order; a project without IPv6 gives a
// PreferDualStack Service its IPv4 address and says so, and refuses the
// others with an Event naming the fix. A second sync reserves nothing.
func TestEnsureFamilies(t *testing.T) {
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	single, prefer, require := v1.IPFamilyPolicySingleStack, v1.IPFamilyPolicyPreferDualStack, v1.IPFamilyPolicyRequireDualStack
	const a4, a6, a6second = "147.75.0.1", "2604:1380:4641:c500::1", "2604:1380:4641:c500::2"
	for _, tc := range []struct {
		name     string
		families []v1.IPFamily
		policy   *v1.IPFamilyPolicy
		noIPv6   bool
		want     []string // the addresses, in order; nil: refused
		wantV6   []bool   // the requests, IPv6 or not
		event    string   // an Event reason the sync records
		lbIP     string   // spec.loadBalancerIP after the sync
		ann      string   // AnnotationLoadBalancerIPs after the sync
	}{
		{name: "IPv4", families: []v1.IPFamily{v4}, policy: &single, want: []string{a4}, wantV6: []bool{false}, lbIP: a4},
		{name: "IPv6 only", families: []v1.IPFamily{v6}, policy: &single, want: []string{a6}, wantV6: []bool{true}, ann: a6},
		{name: "RequireDualStack", families: []v1.IPFamily{v4, v6}, policy: &require, want: []string{a4, a6second}, wantV6: []bool{false, true},
			ann: a4 + "," + a6second},
		{name: "PreferDualStack, IPv6 first", families: []v1.IPFamily{v6, v4}, policy: &prefer, want: []string{a6second, a4}, wantV6: []bool{false, true},
			ann: a6second + "," + a4},
		{name: "PreferDualStack, no IPv6 in the project", families: []v1.IPFamily{v4, v6}, policy: &prefer, noIPv6: true,
			want: []string{a4}, wantV6: []bool{false}, event: "Normal " + ReasonIPv4Only, ann: a4},
		{name: "RequireDualStack, no IPv6 in the project", families: []v1.IPFamily{v4, v6}, policy: &require, noIPv6: true,
			wantV6: []bool{false}, event: "Warning " + ReasonFamilyUnsupported},
		{name: "IPv6 only, no IPv6 in the project", families: []v1.IPFamily{v6}, policy: &single, noIPv6: true,
			event: "Warning " + ReasonFamilyUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeAPI{noIPv6: tc.noIPv6}
			s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
			s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = tc.families, tc.policy
			m, rec, kube := setup(t, s, api)
			// Told before the write, with what is then written.
			var told []string
			m.SetBeforePublish(func(ctx context.Context, svc *v1.Service, ips []string) {
				told = append(told, ips...)
				now, _ := kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
				if now.Spec.LoadBalancerIP != "" || now.Annotations[AnnotationLoadBalancerIPs] != "" {
					t.Errorf("told %v after the write: %q, %q", ips, now.Spec.LoadBalancerIP, now.Annotations[AnnotationLoadBalancerIPs])
				}
			})
			got, err := m.Ensure(context.Background(), s)
			wantTold := []string{tc.lbIP}
			if tc.ann != "" {
				wantTold = strings.Split(tc.ann, ",")
			} else if tc.lbIP == "" {
				wantTold = nil
			}
			if !slices.Equal(told, wantTold) {
				t.Errorf("told %v before the write, want %v", told, wantTold)
			}
			if tc.want == nil {
				if err == nil {
					t.Fatalf("got %v, want a refusal", got)
				}
			} else if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
			if !slices.Equal(api.v6, tc.wantV6) {
				t.Errorf("requests (IPv6?) %v, want %v", api.v6, tc.wantV6)
			}
			ev := strings.Join(events(rec), "\n")
			if tc.event != "" && !strings.Contains(ev, tc.event) {
				t.Errorf("events %q, want %s", ev, tc.event)
			}
			if strings.Contains(tc.event, ReasonFamilyUnsupported) && !strings.Contains(ev, "PreferDualStack") {
				t.Errorf("events %q do not name the fix", ev)
			}
			updated, _ := kube.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
			if updated.Spec.LoadBalancerIP != tc.lbIP {
				t.Errorf("spec.loadBalancerIP %q, want %q (an IPv4 Service's: the field load balancers written for upstream read)", updated.Spec.LoadBalancerIP, tc.lbIP)
			}
			if got := updated.Annotations[AnnotationLoadBalancerIPs]; got != tc.ann {
				t.Errorf("annotation %s = %q, want %q", AnnotationLoadBalancerIPs, got, tc.ann)
			}
			// The next sync adopts what it has, by tags and family (from
			// the stale object: it writes again, which is not checked).
			m.SetBeforePublish(nil)
			before := len(api.requests)
			again, err := m.Ensure(context.Background(), s)
			if tc.want != nil && (err != nil || !slices.Equal(again, tc.want)) {
				t.Errorf("second sync %v, %v; want %v", again, err, tc.want)
			}
			if !tc.noIPv6 && len(api.requests) != before {
				t.Errorf("second sync made %d more requests", len(api.requests)-before)
			}
		})
	}
}

// TestDropIPv6: a dual-stack Service made single-stack releases its IPv6
// Elastic IP and keeps its IPv4 one; deleting a dual-stack Service
// releases both.
func TestDropIPv6(t *testing.T) {
	api := &fakeAPI{}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	prefer, single := v1.IPFamilyPolicyPreferDualStack, v1.IPFamilyPolicySingleStack
	s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, &prefer
	m, rec, kube := setup(t, s, api)
	if got, err := m.Ensure(context.Background(), s); err != nil || len(got) != 2 {
		t.Fatalf("dual-stack: %v, %v", got, err)
	}
	s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []v1.IPFamily{v1.IPv4Protocol}, &single
	s.Annotations[AnnotationLoadBalancerIPs] = "147.75.0.1,2604:1380:4641:c500::2" // as the CCM wrote it
	if _, err := kube.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := m.Ensure(context.Background(), s)
	if err != nil || !slices.Equal(got, []string{"147.75.0.1"}) {
		t.Fatalf("single-stack again: %v, %v", got, err)
	}
	if len(api.res) != 1 || api.res[0].GetAddress() != "147.75.0.1" {
		t.Fatalf("reservations left %v, want the IPv4 one", reservedAddresses(api))
	}
	if ev := strings.Join(events(rec), "\n"); !strings.Contains(ev, "Released Elastic IP 2604:1380:4641:c500::2; the Service no longer has the IPv6 family") {
		t.Errorf("events %q, want the IPv6 release", ev)
	}
	updated, _ := kube.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	if _, ok := updated.Annotations[AnnotationLoadBalancerIPs]; ok || updated.Spec.LoadBalancerIP != "147.75.0.1" {
		t.Errorf("single-stack again: annotations %v, spec.loadBalancerIP %q; want the IPv4 address in spec.loadBalancerIP alone", updated.Annotations, updated.Spec.LoadBalancerIP)
	}

	s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, &prefer
	if got, err := m.Ensure(context.Background(), s); err != nil || len(got) != 2 {
		t.Fatalf("dual-stack again: %v, %v", got, err)
	}
	if err := m.Release(context.Background(), s); err != nil || len(api.res) != 0 {
		t.Fatalf("release: %v, left %v", err, reservedAddresses(api))
	}
}

func reservedAddresses(f *fakeAPI) []string {
	var out []string
	for _, r := range f.res {
		out = append(out, r.GetAddress())
	}
	return out
}

// TestLoadBalancerIPOfAnotherFamily: a user's address of a family the
// Service does not have is refused with the fix; one of the other family
// of a dual-stack Service is brought for that family only.
func TestLoadBalancerIPOfAnotherFamily(t *testing.T) {
	api := &fakeAPI{}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "2604:1380:4641:c500::99")
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
	m, rec, _ := setup(t, s, api)
	_, err := m.Ensure(context.Background(), s)
	if _, ok := err.(*cloudapi.RetryError); !ok || !strings.Contains(err.Error(), "spec.ipFamilies") {
		t.Fatalf("err %v, want a RetryError naming spec.ipFamilies", err)
	}
	if len(api.requests) != 0 {
		t.Errorf("%d requests for a refused Service", len(api.requests))
	}
	if ev := strings.Join(events(rec), "\n"); !strings.Contains(ev, "Warning "+ReasonInvalidIP) {
		t.Errorf("events %q, want a Warning %s", ev, ReasonInvalidIP)
	}
}

// TestDualStackBringsItsOwnIPv6: a dual-stack Service whose
// spec.loadBalancerIP is the user's IPv6 Elastic IP gets it for IPv6 and a
// reserved IPv4 address, and the user's field is left as it is.
func TestDualStackBringsItsOwnIPv6(t *testing.T) {
	own := userReservation("u6", "2604:1380:4641:c500::99", "da")
	own.AddressFamily = ptr(int32(6))
	api := &fakeAPI{res: []metalv1.IPReservation{own}}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "2604:1380:4641:c500::99")
	require := v1.IPFamilyPolicyRequireDualStack
	s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, &require
	m, _, kube := setup(t, s, api)
	got, err := m.Ensure(context.Background(), s)
	if err != nil || !slices.Equal(got, []string{"2604:1380:4641:c500::99", "147.75.0.1"}) {
		t.Fatalf("got %v, %v; want the user's IPv6 then a reserved IPv4", got, err)
	}
	if !slices.Equal(api.v6, []bool{false}) {
		t.Errorf("requests (IPv6?) %v, want one IPv4", api.v6)
	}
	updated, _ := kube.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	if updated.Spec.LoadBalancerIP != "2604:1380:4641:c500::99" {
		t.Errorf("spec.loadBalancerIP %q: the user's address was overwritten", updated.Spec.LoadBalancerIP)
	}
}

// v4OnlyPlacer is a placement policy that denies IPv6.
type v4OnlyPlacer struct{ Placer }

func (p v4OnlyPlacer) Place(ctx context.Context, svc *v1.Service, fam v1.IPFamily) (location.Location, error) {
	if fam == v1.IPv6Protocol {
		return location.Location{}, errors.New("EIP placement policy denied: no IPv6 here")
	}
	return p.Placer.Place(ctx, svc, fam)
}

// TestPolicyDeniesIPv6: the placement policy sees the family; its denial
// of IPv6 serves a PreferDualStack Service IPv4, as Equinix's refusal does.
func TestPolicyDeniesIPv6(t *testing.T) {
	api := &fakeAPI{}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	prefer := v1.IPFamilyPolicyPreferDualStack
	s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, &prefer
	rec := record.NewFakeRecorder(100)
	m := NewManager(api, fake.NewClientset(s), v4OnlyPlacer{placer}, rec, "cluster-uid")
	got, err := m.Ensure(context.Background(), s)
	if err != nil || !slices.Equal(got, []string{"147.75.0.1"}) {
		t.Fatalf("got %v, %v; want the IPv4 address only", got, err)
	}
	ev := strings.Join(events(rec), "\n")
	if !strings.Contains(ev, "Normal "+ReasonIPv4Only) || !strings.Contains(ev, "no IPv6 here") || strings.Contains(ev, ReasonFailed) {
		t.Errorf("events %q, want one %s naming the policy's reason", ev, ReasonIPv4Only)
	}
}

// TestLostIsReportedPerFamily: the Elastic IPs the CCM wrote into
// AnnotationLoadBalancerIPs (a Service with IPv6) were released outside
// the CCM. Each family gets a new reservation and an ElasticIPLost Event
// naming the old and the new address, as an IPv4 Service's
// spec.loadBalancerIP does; addresses the user wrote there are not the
// CCM's to report.
func TestLostIsReportedPerFamily(t *testing.T) {
	const lost4, lost6 = "147.75.9.9", "2604:1380:4641:c500::99"
	annotatedBy := func(manager string) []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:` + AnnotationLoadBalancerIPs + `":{}}}}`)}}
	}
	for _, tc := range []struct {
		name     string
		families []v1.IPFamily
		manager  string
		want     []string // the lost addresses reported
	}{
		{"IPv6 only", []v1.IPFamily{v1.IPv6Protocol}, fieldmanager.CCM, []string{lost6}},
		{"dual-stack", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, fieldmanager.CCM, []string{lost4, lost6}},
		{"written by the user", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, "kubectl-edit", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeAPI{}
			s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
			prefer := v1.IPFamilyPolicyPreferDualStack
			s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = tc.families, &prefer
			var was []string
			for _, f := range tc.families {
				was = append(was, map[v1.IPFamily]string{v1.IPv4Protocol: lost4, v1.IPv6Protocol: lost6}[f])
			}
			s.Annotations[AnnotationLoadBalancerIPs] = strings.Join(was, ",")
			s.ManagedFields = annotatedBy(tc.manager)
			m, rec, _ := setup(t, s, api)
			got, err := m.Ensure(context.Background(), s)
			if err != nil || len(got) != len(tc.families) || slices.Contains(got, lost4) || slices.Contains(got, lost6) {
				t.Fatalf("got %v, %v; want a new address per family", got, err)
			}
			var lost []string
			for _, ev := range events(rec) {
				if strings.Contains(ev, ReasonLost) {
					lost = append(lost, ev)
				}
			}
			if len(lost) != len(tc.want) {
				t.Fatalf("%d ElasticIPLost Events %q, want %d", len(lost), lost, len(tc.want))
			}
			for i, addr := range tc.want {
				if !strings.Contains(lost[i], "Elastic IP "+addr+",") || !strings.Contains(lost[i], "reserved "+got[i]+" instead") {
					t.Errorf("Event %q, want it to name %s and %s", lost[i], addr, got[i])
				}
			}
		})
	}
}

// TestLoadBalancerWithoutIPv6: when the load balancer cannot announce
// IPv6 (MetalLB in native mode), no IPv6 Elastic IP is requested: a
// PreferDualStack Service gets its IPv4 one and a Normal Event with the
// reason, an IPv6-only Service a Warning naming the fix.
func TestLoadBalancerWithoutIPv6(t *testing.T) {
	const reason = "MetalLB in native BGP mode announces IPv4 only; set bgpType=frr"
	for _, tc := range []struct {
		name     string
		policy   v1.IPFamilyPolicy
		families []v1.IPFamily
		want     []string // addresses
		event    string
	}{
		{"PreferDualStack", v1.IPFamilyPolicyPreferDualStack, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, []string{"147.75.0.1"}, "Normal " + ReasonIPv4Only},
		{"IPv6 only", v1.IPFamilyPolicySingleStack, []v1.IPFamily{v1.IPv6Protocol}, nil, "Warning " + ReasonFamilyUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeAPI{}
			s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
			s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = tc.families, &tc.policy
			m, rec, _ := setup(t, s, api)
			m.SetIPv6Unsupported(reason)
			got, err := m.Ensure(context.Background(), s)
			if !slices.Equal(got, tc.want) || (err == nil) != (tc.want != nil) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
			if slices.Contains(api.v6, true) {
				t.Errorf("an IPv6 Elastic IP was requested (requests %v)", api.v6)
			}
			ev := strings.Join(events(rec), "\n")
			if !strings.Contains(ev, tc.event) || !strings.Contains(ev, reason) {
				t.Errorf("events %q, want %s with the reason", ev, tc.event)
			}
		})
	}
}
