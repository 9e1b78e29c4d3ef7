package eip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// Event reasons of a Service's IP families.
const (
	// ReasonFamilyUnsupported: the Service needs an IPv6 Elastic IP that the
	// project cannot give where the Service is placed; it gets no address.
	ReasonFamilyUnsupported = "IPFamilyUnsupported"
	// ReasonIPv4Only: the Service prefers dual-stack, the project cannot
	// give it an IPv6 Elastic IP, and it gets its IPv4 address only.
	ReasonIPv4Only = "IPv4OnlyElasticIP"
)

// families are the address families svc gets an Elastic IP of, in the
// order of spec.ipFamilies: the families the cluster gave the Service, so
// that every address in its status reaches a family its endpoints have
// (IPv4 when the apiserver says none). A PreferDualStack Service in an
// IPv4-only cluster has [IPv4] and gets IPv4.
func families(svc *v1.Service) []v1.IPFamily {
	var out []v1.IPFamily
	for _, f := range svc.Spec.IPFamilies {
		if (f == v1.IPv4Protocol || f == v1.IPv6Protocol) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		out = []v1.IPFamily{v1.IPv4Protocol}
	}
	return out
}

// familyOf is the family of address ip ("" when it is none).
func familyOf(ip string) v1.IPFamily {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return ""
	case a.Unmap().Is4():
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// metalFamily is the Equinix address family of fam: 4 or 6.
func metalFamily(fam v1.IPFamily) int32 {
	if fam == v1.IPv6Protocol {
		return 6
	}
	return 4
}

// fallsBackToIPv4 says whether a PreferDualStack Service that cannot have
// its IPv6 address is served its IPv4 one instead.
func fallsBackToIPv4(svc *v1.Service, fams []v1.IPFamily) bool {
	p := svc.Spec.IPFamilyPolicy
	return p != nil && *p == v1.IPFamilyPolicyPreferDualStack && slices.Contains(fams, v1.IPv4Protocol)
}

// checkLoadBalancerIPFamily refuses a spec.loadBalancerIP the user set to
// an address of a family the Service does not have: the address would be
// served to no endpoint.
func checkLoadBalancerIPFamily(svc *v1.Service, fams []v1.IPFamily) error {
	ip := svc.Spec.LoadBalancerIP
	if ip == "" || writtenByCCM(svc) {
		return nil
	}
	if f := familyOf(ip); f != "" && !slices.Contains(fams, f) {
		return cloudapi.NewRetryError(fmt.Sprintf("spec.loadBalancerIP %s is %s, but the Service's spec.ipFamilies is %v: set an address of the Service's family, give the Service that family (spec.ipFamilyPolicy PreferDualStack or RequireDualStack in a dual-stack cluster), or remove the field and the CCM reserves one", ip, f, fams), invalidIPRetry)
	}
	return nil
}

// forFamily is svc as the lifecycle of family fam sees it: a
// spec.loadBalancerIP of the other family is not this family's to bring
// (a dual-stack Service brings its own address for one family and gets
// an Elastic IP for the other). svc itself is not changed.
func forFamily(svc *v1.Service, fam v1.IPFamily) *v1.Service {
	ip := svc.Spec.LoadBalancerIP
	if ip == "" || familyOf(ip) == fam || familyOf(ip) == "" {
		return svc
	}
	c := *svc
	c.Spec.LoadBalancerIP = ""
	return &c
}

// view is m for one address family: every lookup by tags sees that
// family's reservations only, a new reservation is of that family, and
// only the IPv4 view writes spec.loadBalancerIP (one field, which load
// balancers written for upstream read as the IPv4 Elastic IP). A
// Service's IPv4 and IPv6 reservations carry the same tags: the family,
// which every reservation has, tells them apart, so an IPv4 reservation
// made before IPv6 is found by the same lookup as ever.
func (m *Manager) view(fam v1.IPFamily) *Manager {
	v := *m
	v.api = familyAPI{api: m.api, fam: metalFamily(fam)}
	v.family = fam
	if fam == v1.IPv6Protocol {
		v.placer = ipv6Placer{m.placer}
	}
	return &v
}

// ipv6Placer makes a placement policy's refusal of an IPv6 Elastic IP a
// noIPv6: a policy may deny IPv6 where the project has none, and a
// PreferDualStack Service then gets IPv4 as when Equinix refuses. A
// policy that cannot be evaluated at all stays a cluster-wide failure.
type ipv6Placer struct{ Placer }

func (p ipv6Placer) Place(ctx context.Context, svc *v1.Service, fam v1.IPFamily) (location.Location, error) {
	loc, err := p.Placer.Place(ctx, svc, fam)
	if err != nil && !isClusterWide(err) {
		return loc, &noIPv6{err: err}
	}
	return loc, err
}

// familyAPI filters api to one address family.
type familyAPI struct {
	api
	fam int32
}

func (f familyAPI) ReservationsWithTags(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error) {
	rs, err := f.api.ReservationsWithTags(ctx, tags...)
	return metal.OfFamily(rs, f.fam), err
}

func (f familyAPI) RequestReservation(ctx context.Context, r metal.ReservationRequest) (*metalv1.IPReservation, error) {
	r.IPv6 = f.fam == 6
	return f.api.RequestReservation(ctx, r)
}

func (f familyAPI) ReservationHolding(ctx context.Context, addr string) (*metalv1.IPReservation, error) {
	r, err := f.api.ReservationHolding(ctx, addr)
	if r != nil && metal.ReservationFamily(r) != f.fam {
		return nil, err
	}
	return r, err
}

// refusal is how the Equinix client's errors say that the API refused a
// request for what it asked (metal's callError), as opposed to failing.
type apiRefusal interface{ Refused() bool }

func isRefused(err error) bool {
	var r apiRefusal
	return errors.As(err, &r) && r.Refused()
}

// noIPv6 is the error of a Service that needs an IPv6 Elastic IP it cannot
// have: the project refused the reservation (no IPv6 for Elastic IPs in
// the metro, or not for this project).
type noIPv6 struct {
	err error
	lb  bool // the load balancer cannot announce IPv6 (err names the fix)
}

func (e *noIPv6) Error() string {
	check := "check that the project may reserve public IPv6 in the Service's metro (see docs/explanation/dual-stack.md), or "
	if e.lb {
		check = "or "
	}
	return fmt.Sprintf("no IPv6 Elastic IP for the Service: %v; %sset spec.ipFamilyPolicy to PreferDualStack (it then gets its IPv4 address) or spec.ipFamilies to [IPv4]", e.err, check)
}

func (e *noIPv6) Unwrap() error { return e.err }

// ensureFamilies gives svc an address of each of its families; the
// result is in the order of families. A PreferDualStack Service the
// project cannot give IPv6 gets its IPv4 address and a ReasonIPv4Only
// Event; any other Service that needs IPv6 then fails with a
// ReasonFamilyUnsupported Event. Reservations of a family the Service no
// longer has (spec.ipFamilyPolicy back to SingleStack) are released.
func (m *Manager) ensureFamilies(ctx context.Context, svc *v1.Service) ([]string, error) {
	fams := families(svc)
	if err := checkLoadBalancerIPFamily(svc, fams); err != nil {
		invalidIPTotal.Inc()
		m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonInvalidIP, "%v", err)
		return nil, err
	}
	got := map[v1.IPFamily]string{}
	// The first failure of a family, returned once the other family has
	// had its turn: an IPv4 reservation awaiting approval does not hold
	// up the IPv6 request (both are made in one sync, and plan lists both).
	var failed error
	// IPv4 first: it is the path every Service had before IPv6, and the
	// address a dual-stack Service keeps when IPv6 cannot be had.
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		v := m.view(fam)
		if f := familyOf(svc.Spec.LoadBalancerIP); f != "" && f != fam || hasIPv6(fams) {
			v.noLBIPField = true
		}
		if !slices.Contains(fams, fam) {
			if err := v.dropFamily(ctx, svc, fam); err != nil {
				return nil, err
			}
			continue
		}
		var ip string
		var err error
		if fam == v1.IPv6Protocol && m.noIPv6LB != "" {
			err = &noIPv6{err: errors.New(m.noIPv6LB), lb: true}
		} else {
			ip, err = v.ensureOne(ctx, forFamily(svc, fam))
		}
		var refused *noIPv6
		switch {
		case errors.As(err, &refused) && fallsBackToIPv4(svc, fams):
			m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonIPv4Only, "the Service prefers dual-stack (spec.ipFamilyPolicy PreferDualStack) and gets its IPv4 Elastic IP only: %v", refused.err)
			continue
		case errors.As(err, &refused):
			m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonFamilyUnsupported, "%v", err)
			return nil, err
		case err != nil && failed == nil:
			failed = err
			continue
		case err != nil:
			continue
		}
		got[fam] = ip
	}
	if failed != nil {
		return nil, failed
	}
	var out []string
	for _, fam := range fams {
		if ip := got[fam]; ip != "" {
			out = append(out, ip)
		}
	}
	if hasIPv6(fams) {
		if err := m.publishAll(ctx, svc, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AnnotationLoadBalancerIPs is MetalLB's annotation of the addresses a
// Service asks for. A Service with IPv6 (IPv6-only, or dual-stack) gets its
// Elastic IPs there, comma-separated in the order of spec.ipFamilies:
// spec.loadBalancerIP holds one address of one family, and MetalLB
// refuses it for a dual-stack Service, and together with this annotation.
const AnnotationLoadBalancerIPs = fieldmanager.AnnotationLoadBalancerIPs

func hasIPv6(fams []v1.IPFamily) bool { return slices.Contains(fams, v1.IPv6Protocol) }

// publishAll writes ips into AnnotationLoadBalancerIPs (as the CCM's field
// manager), and takes out the spec.loadBalancerIP the CCM wrote before the
// Service had IPv6 (spec.ipFamilyPolicy changed to PreferDualStack). A
// Service whose spec.loadBalancerIP is the user's keeps it, and gets no
// annotation: MetalLB takes one or the other.
func (m *Manager) publishAll(ctx context.Context, svc *v1.Service, ips []string) error {
	if svc.Spec.LoadBalancerIP != "" && !writtenByCCM(svc) || len(ips) == 0 {
		return nil
	}
	want := strings.Join(ips, ",")
	if svc.Annotations[AnnotationLoadBalancerIPs] == want && svc.Spec.LoadBalancerIP == "" {
		return nil
	}
	body := map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationLoadBalancerIPs: want}}}
	if svc.Spec.LoadBalancerIP != "" {
		body["spec"] = map[string]any{"loadBalancerIP": nil}
	}
	patch, _ := json.Marshal(body)
	if _, err := m.kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldmanager.CCM}); err != nil {
		return m.fail(svc, fmt.Errorf("setting the annotation %s to %s: %w", AnnotationLoadBalancerIPs, want, err))
	}
	return nil
}

// dropFamily releases the Service's own reservation of family fam, which
// it no longer has (a dual-stack Service made single-stack). Its IPv4
// reservation is never dropped this way: every Service had one before
// IPv6, and a Service whose spec.ipFamilies lacks IPv4 never got one from
// this CCM. A sharing key's reservation stays for the key's other
// Services (Release and leave free it with the key).
func (m *Manager) dropFamily(ctx context.Context, svc *v1.Service, fam v1.IPFamily) error {
	if fam == v1.IPv4Protocol {
		return nil
	}
	own, err := m.api.ReservationsWithTags(ctx, Tags(m.clusterID, svc.Namespace, svc.Name)...)
	if err != nil || len(own) == 0 {
		return err
	}
	if err := m.releaseOwn(ctx, svc, fmt.Sprintf("; the Service no longer has the %s family", fam)); err != nil {
		return err
	}
	// The addresses the CCM wrote for it are spec.loadBalancerIP's again
	// (publish, in this sync's IPv4 step).
	if _, ok := svc.Annotations[AnnotationLoadBalancerIPs]; !ok {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationLoadBalancerIPs: nil}}})
	if _, err := m.kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldmanager.CCM}); err != nil {
		return m.fail(svc, fmt.Errorf("removing the annotation %s: %w", AnnotationLoadBalancerIPs, err))
	}
	return nil
}

// placeFamily is the family the placement policy is asked about: m's, or
// IPv4 for the Manager itself.
func (m *Manager) placeFamily() v1.IPFamily {
	if m.family == "" {
		return v1.IPv4Protocol
	}
	return m.family
}

// NeedsIPv6 says whether any of svcs, load-balanced by this CCM, has the
// IPv6 family: whether BGP nodes need their IPv6 sessions (plan's rule;
// the running CCM turns them on at the first IPv6 address it gives).
func NeedsIPv6(svcs []*v1.Service) bool {
	return slices.ContainsFunc(svcs, func(s *v1.Service) bool {
		return lbsnapshot.WantsLoadBalancer(s) && slices.Contains(families(s), v1.IPv6Protocol)
	})
}
