package eip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// A Service's trip through Ensure, top-down in one file: Ensure and the
// steps it takes for the whole Service (its families, a family it no
// longer has, publishing every address), then ensureOne (one family) and
// ensureOwn (a Service's own Elastic IP) with, in the order they are
// taken, the steps every address takes: the user's own address, a new
// reservation, its approval, a lost one, publishing it, and the one write
// of a Service (patchService). A reader follows the Service down this
// file and leaves it only for what has a file of its own: the sharing key
// (ensureShared and its pure rules, sharing.go), leaving an address
// (release.go, which Release shares), the prefix cap (prefixcap.go), the
// tags (tags.go), and the helpers Release and Current use too
// (common.go).

// Ensure returns the Service's addresses, one per family of
// spec.ipFamilies in that order (families), reserving what is missing;
// each family's address comes from ensureOne, run on the view of m for
// that family. A PreferDualStack Service the project cannot give IPv6
// gets its IPv4 address and a ReasonIPv4Only Event; any other Service
// that needs IPv6 then fails with a ReasonFamilyUnsupported Event.
// Reservations of a family the Service no longer has
// (spec.ipFamilyPolicy back to SingleStack) are released (dropFamily).
func (m *Manager) Ensure(ctx context.Context, svc *v1.Service) ([]string, error) {
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

// writtenByCCM reports whether spec.loadBalancerIP was last written by the
// CCM, that is whether it is the address of a reservation the CCM made for
// this Service.
func writtenByCCM(svc *v1.Service) bool {
	return fieldmanager.WroteLoadBalancerIP(svc.ManagedFields)
}

// familyOf is the family of address ip ("" when it is none). An address
// with a zone (fe80::1%eth0) is of none: no Elastic IP has one, and a zone
// is any text, a newline too, which the messages that name the address
// and its family would print (checkRequestedIP refuses it, quoted).
func familyOf(ip string) v1.IPFamily {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil || a.Zone() != "":
		return ""
	case a.Unmap().Is4():
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

func hasIPv6(fams []v1.IPFamily) bool { return slices.Contains(fams, v1.IPv6Protocol) }

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
	body := map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationLoadBalancerIPs: nil}}}
	return m.patchService(ctx, svc, body, "removing the annotation "+AnnotationLoadBalancerIPs)
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

// fallsBackToIPv4 says whether a PreferDualStack Service that cannot have
// its IPv6 address is served its IPv4 one instead.
func fallsBackToIPv4(svc *v1.Service, fams []v1.IPFamily) bool {
	p := svc.Spec.IPFamilyPolicy
	return p != nil && *p == v1.IPFamilyPolicyPreferDualStack && slices.Contains(fams, v1.IPv4Protocol)
}

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
	m.announceAhead(ctx, svc, ips)
	return m.patchService(ctx, svc, body, fmt.Sprintf("setting the annotation %s to %s", AnnotationLoadBalancerIPs, want))
}

// patchService writes body into the Service as a JSON merge patch, as the
// CCM's field manager (fieldmanager.CCM): the managedFields of that manager
// are how a later sync tells the CCM's addresses from the user's
// (writtenByCCM). Every write of a Service goes through it. what names the
// change in the error, which the Service gets as an Event (fail).
func (m *Manager) patchService(ctx context.Context, svc *v1.Service, body map[string]any, what string) error {
	patch, _ := json.Marshal(body)
	if _, err := m.kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldmanager.CCM}); err != nil {
		return m.fail(svc, fmt.Errorf("%s: %w", what, err))
	}
	return nil
}

// ensureOne returns the Service's address of m's family, reserving one
// if needed.
//
// A Service without a sharing key gets an Elastic IP of its own
// (ensureOwn), one with a key its key's (ensureShared).
// A Service with spec.loadBalancerIP set by the user to an address that is
// not its own reservation brings its own IP: nothing is reserved, and the
// address is served if an Elastic IP reservation of the project holds it
// (ownAddress), else the sync fails saying why. One that is not a usable
// address gets an InvalidLoadBalancerIP Event and a RetryError of
// invalidIPRetry. One the CCM set whose reservation is gone
// gets a new reservation and an ElasticIPLost Event (see reportLost).
//
// A Service that moved (it gained, changed or dropped a sharing key) leaves
// its previous address behind: its own reservation is released, a shared
// one only when no other Service of that key is left (leave).
func (m *Manager) ensureOne(ctx context.Context, svc *v1.Service) (string, error) {
	var (
		ip  string
		err error
	)
	if key := lbsnapshot.SharingKey(svc); key == "" {
		ip, err = m.ensureOwn(ctx, svc)
	} else {
		ip, err = m.ensureShared(ctx, svc, key)
	}
	if err != nil {
		return "", err
	}
	if err := m.leave(ctx, svc, ip); err != nil {
		return "", err
	}
	return ip, nil
}

// ensureOwn is Ensure for a Service without a sharing key: its own
// reservation, tagged for it.
func (m *Manager) ensureOwn(ctx context.Context, svc *v1.Service) (string, error) {
	tags := Tags(m.clusterID, svc.Namespace, svc.Name)
	own, err := m.api.ReservationsWithTags(ctx, tags...)
	if err != nil {
		return "", m.fail(svc, fmt.Errorf("looking up the Service's Elastic IP: %w", err))
	}
	res := m.pick(svc, own, "this Service's tags")
	lbIP := svc.Spec.LoadBalancerIP
	ours := lbIP != "" && writtenByCCM(svc)
	if lbIP != "" && !ours && (res == nil || res.GetAddress() != lbIP) {
		return m.ownAddress(ctx, svc, lbIP)
	}
	// The CCM wrote the Service an address of this family, yet no
	// reservation carries the Service's tags: it was released outside the
	// CCM (or the cache has not seen it yet; RequestReservation looks again,
	// afresh, before creating), unless the address is a sharing key's the
	// Service just left.
	lost := ""
	if prev := m.ccmAddress(svc); res == nil && prev != "" {
		if shared, err := m.reservationAt(ctx, prev); err != nil || shared == nil {
			lost = prev
		}
	}

	if res == nil {
		loc, err := m.placer.Place(ctx, svc, m.placeFamily())
		if err != nil {
			return "", m.fail(svc, err)
		}
		if res, err = m.reserve(ctx, svc, loc, tags, ""); err != nil {
			return "", err
		}
	}
	if res, err = m.awaitApproval(ctx, svc, res); err != nil {
		return "", err
	}
	ip := res.GetAddress()
	if lost != "" && ip != lost {
		m.reportLost(svc, lost, ip)
	}
	err = m.publish(ctx, svc, ip)
	if apierrors.IsNotFound(err) {
		// The Service is gone while its address was being reserved:
		// nothing calls EnsureLoadBalancerDeleted for a Service that no
		// longer exists (a new leader never saw it), so its reservation
		// would leak. Found by make soak.
		if rerr := m.releaseOwn(ctx, svc, "; the Service was deleted while it was reserved"); rerr != nil {
			return "", errors.Join(err, rerr)
		}
	}
	return ip, err
}

// pick chooses one reservation deterministically (the oldest) when several
// carry the same tags (the Service's, or its sharing key's), which only
// happens when something outside this CCM created one; they are reported,
// not deleted.
func (m *Manager) pick(svc *v1.Service, own []metalv1.IPReservation, whose string) *metalv1.IPReservation {
	if len(own) == 0 {
		return nil
	}
	sorted := slices.Clone(own)
	metal.SortReservations(sorted)
	if len(sorted) > 1 && svc != nil {
		m.recorder.Eventf(svc, v1.EventTypeWarning, reasonDuplicate, "%d Elastic IP reservations carry %s; using %s, the oldest; release the others in the Equinix Metal console", len(sorted), whose, sorted[0].GetAddress())
	}
	return &sorted[0]
}

// ownAddress is the user's own address (spec.loadBalancerIP), if usable: an
// IPv4 address that an Elastic IP reservation of the project holds, where
// placement puts the Service (ownAddressRefusal).
//
// Why the reservation is checked at all: who wrote the field is all that
// tells the user's address from the CCM's, and a Service created again from
// a saved object (a backup's restore, `kubectl get -o yaml` and apply) has
// the CCM's old address with the user as its writer. The CCM released that
// address when the Service was deleted; reporting it would route the
// Service nowhere, or to whoever Equinix gives the address next. The lookup
// is in the reservation cache, so a Service costs no Equinix call per sync.
// The refusal is the sync's error, which the service controller records as
// SyncLoadBalancerFailed and retries with backoff (at most every 5 minutes)
// without writing a status; reserving the address fixes it without an edit.
func (m *Manager) ownAddress(ctx context.Context, svc *v1.Service, lbIP string) (string, error) {
	if err := checkRequestedIP(lbIP); err != nil {
		invalidIPTotal.Inc()
		m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonInvalidIP, "%v", err)
		return "", err
	}
	refusal, err := m.ownAddressVerdict(ctx, svc, lbIP)
	if err != nil {
		return "", m.fail(svc, fmt.Errorf("looking up the Elastic IP reservation of spec.loadBalancerIP %s: %w", lbIP, err))
	}
	if refusal != nil {
		return "", refusal
	}
	return lbIP, nil
}

// ServesOwnAddress reports whether the CCM serves the user's own address
// lbIP of svc: the decision ownAddress makes, without its Events, so that
// the load-balancer module is given exactly the own addresses the CCM
// reports (an address held in another metro than the Service's placement
// is routed nowhere: the module must not announce it either). From the
// reservation cache: no Equinix call.
func (m *Manager) ServesOwnAddress(ctx context.Context, svc *v1.Service, lbIP string) bool {
	if checkRequestedIP(lbIP) != nil {
		return false
	}
	refusal, err := m.ownAddressVerdict(ctx, svc, lbIP)
	return err == nil && refusal == nil
}

// checkRequestedIP returns nil when ip (spec.loadBalancerIP set by the user)
// is an address the CCM can serve, and otherwise an error that names the
// field and the fix, and that tells the service controller to retry only
// after invalidIPRetry. Whether its family is one of the Service's is
// checkLoadBalancerIPFamily's.
func checkRequestedIP(ip string) error {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return cloudapi.NewRetryError(fmt.Sprintf("spec.loadBalancerIP %q is not an IP address; set it to an Elastic IP address reserved in the project (bring your own IP), or remove the field and the CCM reserves one", ip), invalidIPRetry)
	case a.Zone() != "":
		// No Elastic IP has a zone; and a zone is any text (a newline
		// too), which the messages that print the address unquoted
		// (here and in ownAddressRefusal) must not carry into an Event.
		return cloudapi.NewRetryError(fmt.Sprintf("spec.loadBalancerIP %q has an IPv6 zone, which no Elastic IP has; set it to an Elastic IP address reserved in the project without %%zone, or remove the field and the CCM reserves one", ip), invalidIPRetry)
	case a.Unmap().IsUnspecified() || a.Unmap().IsLoopback() || a.Unmap().IsMulticast():
		return cloudapi.NewRetryError(fmt.Sprintf("spec.loadBalancerIP %s cannot be a Service address; set an Elastic IP address reserved in the project, or remove the field and the CCM reserves one", ip), invalidIPRetry)
	}
	return nil
}

// ownAddressVerdict is why the user's own address lbIP is refused (nil if
// it is served), or the error of looking its reservation up.
func (m *Manager) ownAddressVerdict(ctx context.Context, svc *v1.Service, lbIP string) (refusal, err error) {
	res, err := m.api.ReservationHolding(ctx, lbIP)
	if err != nil {
		return nil, err
	}
	// A Service bringing its own address needs no placement: when the
	// policy decides nothing for it (or denies it an Elastic IP of the
	// CCM's), any metro of the project will do.
	var loc *location.Location
	if l, err := m.placer.Place(ctx, svc, m.placeFamily()); err == nil {
		loc = &l
	}
	return ownAddressRefusal(lbIP, res, loc, m.api.ProjectID()), nil
}

// ownAddressRefusal says why the user's own address addr is not served,
// or nil when it is: res is the project's Elastic IP reservation that holds
// it (nil for none), loc where placement puts the Service (nil when it
// decides nothing). Equinix Metal routes an Elastic IP only to the
// project's devices in the reservation's own metro (or facility).
func ownAddressRefusal(addr string, res *metalv1.IPReservation, loc *location.Location, project string) error {
	const fix = "or remove spec.loadBalancerIP and the CCM reserves an Elastic IP for the Service"
	where := ""
	if loc != nil {
		where = " in " + loc.String()
	}
	if res == nil {
		reserve := fmt.Sprintf("reserve %s in project %s", addr, project)
		if loc != nil {
			reserve += " (" + loc.String() + ")"
		}
		return fmt.Errorf("spec.loadBalancerIP %s is not an Elastic IP reservation of project %s%s: an address the project does not hold is routed nowhere and may belong to someone else (a Service created again from a saved object keeps the address the CCM released when it was deleted); %s, %s", addr, project, where, reserve, fix)
	}
	if loc == nil {
		return nil
	}
	if at, ok := reservedIn(res, *loc); !ok {
		return fmt.Errorf("spec.loadBalancerIP %s is not an Elastic IP reservation of project %s%s, where placement puts the Service: it is reserved in %s, and an Elastic IP is routed only in its own metro or facility; bring an address reserved in %s, place the Service in %s (its metro or facility annotation), %s", addr, project, where, at, loc, at, fix)
	}
	return nil
}

// ccmAddress is the address of m's family the CCM last wrote for the
// Service: spec.loadBalancerIP where the CCM wrote it (forFamily has
// emptied it for the other family), else the Service's address of the
// family in AnnotationLoadBalancerIPs where the CCM wrote that (a Service
// with IPv6). "" when the CCM wrote none, or the user wrote the field.
func (m *Manager) ccmAddress(svc *v1.Service) string {
	if ip := svc.Spec.LoadBalancerIP; ip != "" {
		if writtenByCCM(svc) {
			return ip
		}
		return ""
	}
	if !fieldmanager.WroteAnnotation(svc.ManagedFields, AnnotationLoadBalancerIPs) {
		return ""
	}
	fam := m.family
	if fam == "" {
		fam = v1.IPv4Protocol
	}
	for _, ip := range strings.Split(svc.Annotations[AnnotationLoadBalancerIPs], ",") {
		if ip = strings.TrimSpace(ip); familyOf(ip) == fam {
			return ip
		}
	}
	return ""
}

// reservedIn says where res is, and whether that is loc.
func reservedIn(res *metalv1.IPReservation, loc location.Location) (string, bool) {
	if loc.Facility != "" {
		f := res.GetFacility()
		return "facility " + f.GetCode(), f.GetCode() == "" || strings.EqualFold(f.GetCode(), loc.Facility)
	}
	mt := res.GetMetro()
	return "metro " + mt.GetCode(), mt.GetCode() == "" || strings.EqualFold(mt.GetCode(), loc.Metro)
}

// reserve requests a reservation with tags in loc; key, if any, is named in
// the Events. Past the BGP prefix limit, with the cap on, it reserves
// nothing (underPrefixCap).
func (m *Manager) reserve(ctx context.Context, svc *v1.Service, loc location.Location, tags []string, key string) (*metalv1.IPReservation, error) {
	if m.prefixCap != nil {
		m.capMu.Lock()
		defer m.capMu.Unlock()
		if err := m.underPrefixCap(ctx, svc, loc); err != nil {
			return nil, err
		}
	}
	kind := "a public IPv4 Elastic IP"
	if m.family == v1.IPv6Protocol {
		kind = "a public IPv6 Elastic IP"
	}
	what, details := kind, Details
	if key != "" {
		what = fmt.Sprintf("%s for sharing key %q", kind, key)
		details = fmt.Sprintf("%s (shared by the Services with sharing key %q)", Details, key)
	}
	m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonRequested, "Requesting %s in %s", what, loc)
	res, err := m.api.RequestReservation(ctx, metal.ReservationRequest{Location: loc, Tags: tags, Details: details})
	if err != nil && m.family == v1.IPv6Protocol && isRefused(err) {
		// Ensure decides what this means for the Service (IPv4 only,
		// or no address), and says so in one Event.
		return nil, &noIPv6{err: fmt.Errorf("requesting an IPv6 Elastic IP in %s: %w", loc, err)}
	}
	if err != nil {
		return nil, m.fail(svc, fmt.Errorf("requesting an Elastic IP in %s: %w", loc, err))
	}
	if !pending(res) {
		m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonReserved, "Reserved Elastic IP %s in %s", res.GetAddress(), loc)
	}
	return res, nil
}

// apiRefusal is how the Equinix client's errors say that the API refused a
// request for what it asked (metal's callError), as opposed to failing.
type apiRefusal interface{ Refused() bool }

func isRefused(err error) bool {
	var r apiRefusal
	return errors.As(err, &r) && r.Refused()
}

// awaitApproval returns res once Equinix has approved it, else a RetryError.
func (m *Manager) awaitApproval(ctx context.Context, svc *v1.Service, res *metalv1.IPReservation) (*metalv1.IPReservation, error) {
	if !pending(res) {
		return res, nil
	}
	fresh, err := m.api.Reservation(ctx, res.GetId())
	if err != nil {
		return nil, m.fail(svc, fmt.Errorf("reading Elastic IP reservation %s: %w", res.GetId(), err))
	}
	if pending(fresh) {
		m.recorder.Eventf(svc, v1.EventTypeNormal, reasonPending, "Elastic IP reservation %s is requested and waits for Equinix Metal's approval", res.GetId())
		return nil, cloudapi.NewRetryError(fmt.Sprintf("Elastic IP reservation %s is still pending approval", res.GetId()), m.PendingRetry)
	}
	m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonReserved, "Reserved Elastic IP %s", fresh.GetAddress())
	return fresh, nil
}

// reportLost says, in an Event, a metric and the log, that the Service's
// own reservation of lost disappeared and that it now has ip instead.
//
// Why a new reservation rather than keeping the old address: an address
// that is no longer reserved in the project is routed nowhere and may be
// handed to someone else, so the Service would be silently unreachable.
// A new Elastic IP keeps it reachable; the Event names both addresses so
// that whoever maintains DNS or firewall rules for the old one can follow.
func (m *Manager) reportLost(svc *v1.Service, lost, ip string) {
	lostTotal.Inc()
	klog.InfoS("A Service's Elastic IP reservation was deleted outside the CCM; reserved a new one", "service", klog.KObj(svc), "lost", lost, "new", ip)
	m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonLost, "Elastic IP %s, reserved by the CCM for this Service, no longer exists in the project (released outside the CCM, for example in the console); reserved %s instead and moved the Service to it; update DNS records and firewall rules that name %s", lost, ip, lost)
}

// reservationAt is the cluster's Service reservation with address addr, if
// any (from the cache).
func (m *Manager) reservationAt(ctx context.Context, addr string) (*metalv1.IPReservation, error) {
	if addr == "" {
		return nil, nil
	}
	all, err := m.api.ReservationsWithTags(ctx, UsageTag, ClusterTag(m.clusterID))
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].GetAddress() == addr {
			return &all[i], nil
		}
	}
	return nil, nil
}

// publish writes ip into spec.loadBalancerIP (as the CCM's field manager)
// unless it is there already.
func (m *Manager) publish(ctx context.Context, svc *v1.Service, ip string) error {
	if svc.Spec.LoadBalancerIP == ip {
		return nil
	}
	if familyOf(ip) == v1.IPv6Protocol || m.noLBIPField {
		// One field for one address: it stays the IPv4 Elastic IP of an
		// IPv4 Service, which load balancers written for upstream read; a
		// user's own address of the other family is never overwritten;
		// a Service with IPv6 gets its addresses in
		// AnnotationLoadBalancerIPs (publishAll). The address reaches the
		// status through Ensure's result.
		if !slices.Contains(previous(svc), ip) {
			m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonAssigned, "Assigned Elastic IP %s to the Service", ip)
		}
		return nil
	}
	// spec.loadBalancerIP is deprecated, but load balancers written for
	// upstream (kube-vip, older MetalLB setups) read it.
	body := map[string]any{"spec": map[string]any{"loadBalancerIP": ip}}
	m.announceAhead(ctx, svc, []string{ip})
	if err := m.patchService(ctx, svc, body, fmt.Sprintf("setting spec.loadBalancerIP to %s", ip)); err != nil {
		return err
	}
	m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonAssigned, "Assigned Elastic IP %s to the Service", ip)
	return nil
}

// previous are the addresses the Service has: its status, and
// spec.loadBalancerIP where the CCM wrote it.
func previous(svc *v1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" && !slices.Contains(out, in.IP) {
			out = append(out, in.IP)
		}
	}
	if ip := svc.Spec.LoadBalancerIP; ip != "" && writtenByCCM(svc) && !slices.Contains(out, ip) {
		out = append(out, ip)
	}
	return out
}

// fail reports err on the Service as an ElasticIPFailed Warning, unless it
// is reported elsewhere: once for the cluster (ClusterWideError), or by
// Ensure (noIPv6); and returns it.
func (m *Manager) fail(svc *v1.Service, err error) error {
	var v6 *noIPv6
	if !isClusterWide(err) && !errors.As(err, &v6) { // Ensure reports noIPv6 itself
		m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonFailed, "%v", err)
	}
	return err
}

// Event reasons of a Service's IP families.
const (
	// ReasonFamilyUnsupported: the Service needs an IPv6 Elastic IP that the
	// project cannot give where the Service is placed; it gets no address.
	ReasonFamilyUnsupported = "IPFamilyUnsupported"
	// ReasonIPv4Only: the Service prefers dual-stack, the project cannot
	// give it an IPv6 Elastic IP, and it gets its IPv4 address only.
	ReasonIPv4Only = "IPv4OnlyElasticIP"
)

// AnnotationLoadBalancerIPs is MetalLB's annotation of the addresses a
// Service asks for. A Service with IPv6 (IPv6-only, or dual-stack) gets its
// Elastic IPs there, comma-separated in the order of spec.ipFamilies:
// spec.loadBalancerIP holds one address of one family, and MetalLB
// refuses it for a dual-stack Service, and together with this annotation.
const AnnotationLoadBalancerIPs = fieldmanager.AnnotationLoadBalancerIPs
