package eip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// Ensure returns the Service's addresses, one per family of
// spec.ipFamilies in that order (families), reserving what is missing
// (ensureFamilies); each family's address comes from ensureOne.
func (m *Manager) Ensure(ctx context.Context, svc *v1.Service) ([]string, error) {
	return m.ensureFamilies(ctx, svc)
}

// ensureOne returns the Service's address of m's family, reserving one
// if needed.
//
// A Service with a sharing key gets its key's Elastic IP (see ensureShared).
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
	if key := lbsnapshot.SharingKey(svc); key != "" {
		ip, err = m.ensureShared(ctx, svc, key)
	} else {
		ip, err = m.ensureOwn(ctx, svc)
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

// ensureShared is Ensure for a Service with a sharing key: the key's one
// reservation (tags SharedTags), reserved by the first Service of the key
// where placement puts it.
//
// Everything for one key runs under the key's lock, in this process (the
// leader): two Services of one key synced at once make one reservation
// (RequestReservation would also find the first one by its tags), and a
// release never races a newcomer. A Service that does not hold the address
// yet is admitted only if it does not clash with the Services that do
// (group: MetalLB's rule), and if placement puts it where the reservation
// is; otherwise it gets an ElasticIPShareRefused Event naming the other
// Service and an error, and the service controller retries it with backoff
// (so it gets the address once the Service in its way is gone or changed).
//
// A spec.loadBalancerIP the user set wins over the key: the Service brings
// its own address and the key only tells MetalLB which Services may share
// it, as before this CCM shared anything.
func (m *Manager) ensureShared(ctx context.Context, svc *v1.Service, key string) (string, error) {
	if lbIP := svc.Spec.LoadBalancerIP; lbIP != "" && !writtenByCCM(svc) {
		return m.ownAddress(ctx, svc, lbIP)
	}
	tags := SharedTags(m.clusterID, key)
	m.keys.LockKey(tags[1])
	defer func() { _ = m.keys.UnlockKey(tags[1]) }()

	found, err := m.api.ReservationsWithTags(ctx, tags...)
	if err != nil {
		return "", m.fail(svc, fmt.Errorf("looking up the Elastic IP of sharing key %q: %w", key, err))
	}
	res := m.pick(svc, found, fmt.Sprintf("the tags of sharing key %q", key))
	addr := ""
	if res != nil {
		addr = res.GetAddress()
	}
	all, err := m.listServices(ctx)
	if err != nil {
		return "", m.fail(svc, err)
	}
	admitted, refused := group(keyGroup(all, svc, key, addr), addr)
	for _, r := range refused {
		if r.Service == id(svc) {
			return "", m.refuse(svc, r.Error()+"; the Service gets the address once that changes")
		}
	}
	if !holds(svc, addr) {
		loc, err := m.placer.Place(ctx, svc, m.placeFamily())
		if err != nil {
			return "", m.fail(svc, err)
		}
		if res == nil {
			if res, err = m.reserve(ctx, svc, loc, tags, key); err != nil {
				return "", err
			}
		} else if where, ok := reservedIn(res, loc); !ok {
			return "", m.refuse(svc, fmt.Sprintf("placement puts Service %s in %s, but the Elastic IP %s of sharing key %q%s is in %s; one key has one address in one place: give the Services of the key the same metro or facility, or this Service another key",
				id(svc), loc, res.GetAddress(), key, others(admitted, svc), where))
		}
	}
	if res, err = m.awaitApproval(ctx, svc, res); err != nil {
		return "", err
	}
	ip := res.GetAddress()
	if lbIP := m.ccmAddress(svc); lbIP != "" && lbIP != ip {
		// The address the CCM gave the Service is no reservation of the
		// cluster any more (not its own, nor another key's it just left):
		// the key's reservation was released outside the CCM.
		if prev, err := m.reservationAt(ctx, lbIP); err == nil && prev == nil {
			m.reportLost(svc, lbIP, ip)
		}
	}
	if err := m.publish(ctx, svc, ip); err != nil {
		return "", err
	}
	// A Service that had an Elastic IP of its own before it took a key
	// needs it no longer.
	return ip, m.releaseOwn(ctx, svc, fmt.Sprintf("; the Service now shares %s (sharing key %q)", ip, key))
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
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"loadBalancerIP": ip}})
	if _, err := m.kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldmanager.CCM}); err != nil {
		return m.fail(svc, fmt.Errorf("setting spec.loadBalancerIP to %s: %w", ip, err))
	}
	m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonAssigned, "Assigned Elastic IP %s to the Service", ip)
	return nil
}

// refuse reports that the Service may not share its key's address.
func (m *Manager) refuse(svc *v1.Service, msg string) error {
	m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonShareRefused, "%s", msg)
	return fmt.Errorf("%s", msg)
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

// others names the admitted Services other than svc, for a message.
func others(admitted []*v1.Service, svc *v1.Service) string {
	var names []string
	for _, s := range admitted {
		if s.UID != svc.UID {
			names = append(names, id(s))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (used by " + strings.Join(names, ", ") + ")"
}
