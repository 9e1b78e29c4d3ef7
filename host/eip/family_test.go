package eip

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	cloudapi "k8s.io/cloud-provider/api"
)

func TestFamilies(t *testing.T) {
	single, prefer, require := v1.IPFamilyPolicySingleStack, v1.IPFamilyPolicyPreferDualStack, v1.IPFamilyPolicyRequireDualStack
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	for _, tc := range []struct {
		name     string
		families []v1.IPFamily
		policy   *v1.IPFamilyPolicy
		ingress  string // the address the Service already has
		want     string // "" serve, "refuse", "note", "warn"
	}{
		{name: "unset (an apiserver that does not default them)", want: ""},
		{name: "IPv4 single-stack", families: []v1.IPFamily{v4}, policy: &single, want: ""},
		{name: "IPv6 single-stack", families: []v1.IPFamily{v6}, policy: &single, want: "refuse"},
		{name: "IPv6 single-stack, policy unset", families: []v1.IPFamily{v6}, want: "refuse"},
		{name: "RequireDualStack", families: []v1.IPFamily{v4, v6}, policy: &require, want: "refuse"},
		{name: "RequireDualStack, IPv6 first", families: []v1.IPFamily{v6, v4}, policy: &require, want: "refuse"},
		{name: "PreferDualStack in a dual-stack cluster", families: []v1.IPFamily{v4, v6}, policy: &prefer, want: "note"},
		{name: "PreferDualStack, IPv6 first", families: []v1.IPFamily{v6, v4}, policy: &prefer, want: "note"},
		{name: "PreferDualStack in an IPv4 cluster", families: []v1.IPFamily{v4}, policy: &prefer, want: "note"},
		{name: "PreferDualStack in an IPv6 cluster", families: []v1.IPFamily{v6}, policy: &prefer, want: "refuse"},
		{name: "RequireDualStack served by an earlier release", families: []v1.IPFamily{v4, v6}, policy: &require, ingress: "147.75.0.1", want: "warn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("web", nil, "")
			s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = tc.families, tc.policy
			if tc.ingress != "" {
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: tc.ingress}}
			}
			v := checkFamilies(s)
			got := ""
			switch {
			case v.refuse != nil:
				got = "refuse"
			case v.warn:
				got = "warn"
			case v.note != "":
				got = "note"
			}
			if got != tc.want {
				t.Fatalf("verdict %q (%+v), want %q", got, v, tc.want)
			}
			msg := v.note
			if v.refuse != nil {
				msg = v.refuse.Error()
				if _, ok := v.refuse.(*cloudapi.RetryError); !ok {
					t.Errorf("refusal %T, want a RetryError (no retry until the Service changes)", v.refuse)
				}
			}
			if got != "" && !strings.Contains(msg, "IPv4 Elastic IPs only") {
				t.Errorf("message %q does not say what the CCM gives", msg)
			}
		})
	}
}

// TestEnsureRefusesIPv6Only: nothing is reserved for a Service that cannot
// work without IPv6, and the Event says why and what to change.
func TestEnsureRefusesIPv6Only(t *testing.T) {
	api := &fakeAPI{}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	m, rec, _ := setup(t, s, api)
	if ip, err := m.Ensure(context.Background(), s); err == nil {
		t.Fatalf("an IPv6-only Service got %s", ip)
	}
	if len(api.requests) != 0 || api.calls != 0 {
		t.Errorf("%d reservation requests, %d calls for a refused Service", len(api.requests), api.calls)
	}
	ev := strings.Join(events(rec), "\n")
	if !strings.Contains(ev, "Warning "+ReasonFamilyUnsupported) || !strings.Contains(ev, "spec.ipFamilies [IPv4]") {
		t.Errorf("events %q, want a %s Warning naming the fix", ev, ReasonFamilyUnsupported)
	}
}

// TestEnsurePreferDualStackGetsIPv4: PreferDualStack falls back to IPv4 and
// says so.
func TestEnsurePreferDualStackGetsIPv4(t *testing.T) {
	api := &fakeAPI{}
	s := svc("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	prefer := v1.IPFamilyPolicyPreferDualStack
	s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, &prefer
	m, rec, _ := setup(t, s, api)
	ip, err := m.Ensure(context.Background(), s)
	if err != nil || ip != "147.75.0.1" {
		t.Fatalf("ip %q err %v, want the IPv4 Elastic IP", ip, err)
	}
	if ev := strings.Join(events(rec), "\n"); !strings.Contains(ev, "Normal "+ReasonIPv4Only) {
		t.Errorf("events %q, want a Normal %s", ev, ReasonIPv4Only)
	}
}
