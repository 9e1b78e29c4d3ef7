package eip

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	cloudapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/keymutex"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// API is what the EIP lifecycle needs from Equinix Metal. Lookups by tags
// are answered from the client's cache, so a Service with nothing to change
// costs no API call.
type API interface {
	ReservationsWithTags(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error)
	// RequestReservation must be idempotent by tags: it looks them up before
	// creating (re-reading the project after a lost response), so a retry
	// reserves nothing twice.
	RequestReservation(ctx context.Context, r metal.ReservationRequest) (*metalv1.IPReservation, error)
	Reservation(ctx context.Context, id string) (*metalv1.IPReservation, error)
	DeleteIP(ctx context.Context, id string) error
}

// Event reasons, one per step of an Elastic IP's life.
const (
	ReasonRequested = "ElasticIPRequested"
	ReasonReserved  = "ElasticIPReserved"
	ReasonPending   = "ElasticIPPending"
	ReasonAssigned  = "ElasticIPAssigned"
	ReasonReleased  = "ElasticIPReleased"
	ReasonFailed    = "ElasticIPFailed"
	ReasonDuplicate = "ElasticIPDuplicate"
)

// Manager runs the lifecycle.
type Manager struct {
	api       API
	kube      kubernetes.Interface
	placer    Placer
	recorder  record.EventRecorder
	clusterID string
	// services tells who else has a sharing key (SetServices).
	services Services
	// keys serialises the work on one sharing key (by its tag).
	keys keymutex.KeyMutex
	// PendingRetry is how soon the service controller retries a Service
	// whose reservation Equinix has not approved yet.
	PendingRetry time.Duration
}

// NewManager returns a Manager for the cluster whose kube-system namespace
// has the UID clusterID.
func NewManager(api API, kube kubernetes.Interface, placer Placer, recorder record.EventRecorder, clusterID string) *Manager {
	registerMetrics()
	return &Manager{api: api, kube: kube, placer: placer, recorder: recorder, clusterID: clusterID, keys: keymutex.NewHashed(64), PendingRetry: 10 * time.Second}
}

// Ensure returns the Service's address, reserving one if needed.
//
// A Service with a sharing key gets its key's Elastic IP (see ensureShared).
// A Service with spec.loadBalancerIP set by the user to an address that is
// not its own reservation brings its own IP: nothing is reserved. One that
// is not a usable address gets an InvalidLoadBalancerIP Event and a
// RetryError of InvalidIPRetry. One the CCM set whose reservation is gone
// gets a new reservation and an ElasticIPLost Event (see reportLost).
//
// A Service that moved (it gained, changed or dropped a sharing key) leaves
// its previous address behind: its own reservation is released, a shared
// one only when no other Service of that key is left (leave).
func (m *Manager) Ensure(ctx context.Context, svc *v1.Service) (string, error) {
	var (
		ip  string
		err error
	)
	if key := SharingKey(svc); key != "" {
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
		return m.ownAddress(svc, lbIP)
	}
	// The CCM wrote spec.loadBalancerIP, yet no reservation carries the
	// Service's tags: it was released outside the CCM (or the cache has not
	// seen it yet; RequestReservation looks again, afresh, before creating),
	// unless the address is a sharing key's the Service just left.
	lost := ""
	if res == nil && ours {
		if shared, err := m.reservationAt(ctx, lbIP); err != nil || shared == nil {
			lost = lbIP
		}
	}

	if res == nil {
		loc, err := m.placer.Place(ctx, svc)
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
	return ip, m.publish(ctx, svc, ip)
}

// ownAddress is the user's own address (spec.loadBalancerIP), if usable.
func (m *Manager) ownAddress(svc *v1.Service, lbIP string) (string, error) {
	if err := checkRequestedIP(lbIP); err != nil {
		invalidIPTotal.Inc()
		m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonInvalidIP, "%v", err)
		return "", err
	}
	return lbIP, nil
}

// reserve requests a reservation with tags in loc; key, if any, is named in
// the Events.
func (m *Manager) reserve(ctx context.Context, svc *v1.Service, loc location.Location, tags []string, key string) (*metalv1.IPReservation, error) {
	what, details := "a public IPv4 Elastic IP", Details
	if key != "" {
		what = fmt.Sprintf("a public IPv4 Elastic IP for sharing key %q", key)
		details = fmt.Sprintf("%s (shared by the Services with sharing key %q)", Details, key)
	}
	m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonRequested, "Requesting %s in %s", what, loc)
	res, err := m.api.RequestReservation(ctx, metal.ReservationRequest{Location: loc, Tags: tags, Details: details})
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
		m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonPending, "Elastic IP reservation %s is requested and waits for Equinix Metal's approval", res.GetId())
		return nil, cloudapi.NewRetryError(fmt.Sprintf("Elastic IP reservation %s is still pending approval", res.GetId()), m.PendingRetry)
	}
	m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonReserved, "Reserved Elastic IP %s", fresh.GetAddress())
	return fresh, nil
}

// publish writes ip into spec.loadBalancerIP (as the CCM's field manager)
// unless it is there already.
func (m *Manager) publish(ctx context.Context, svc *v1.Service, ip string) error {
	if svc.Spec.LoadBalancerIP == ip {
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

// Current returns the Service's address for GetLoadBalancer: its own
// reservation's, its sharing key's once the Service holds it, or its own
// spec.loadBalancerIP.
func (m *Manager) Current(ctx context.Context, svc *v1.Service) (string, bool, error) {
	own, err := m.api.ReservationsWithTags(ctx, Tags(m.clusterID, svc.Namespace, svc.Name)...)
	if err != nil {
		return "", false, err
	}
	if res := m.pick(nil, own, ""); res != nil && !pending(res) {
		return res.GetAddress(), true, nil
	}
	if key := SharingKey(svc); key != "" {
		shared, err := m.api.ReservationsWithTags(ctx, SharedTags(m.clusterID, key)...)
		if err != nil {
			return "", false, err
		}
		if res := m.pick(nil, shared, ""); res != nil && !pending(res) && slices.Contains(previous(svc), res.GetAddress()) {
			return res.GetAddress(), true, nil
		}
	}
	if ip := svc.Spec.LoadBalancerIP; ip != "" && !writtenByCCM(svc) && checkRequestedIP(ip) == nil {
		return ip, true, nil
	}
	return "", false, nil
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

// Release deletes every reservation tagged for the Service, and its sharing
// key's when no other Service of the key is left (also that of a key it
// held before, see leave).
func (m *Manager) Release(ctx context.Context, svc *v1.Service) error {
	own, err := m.api.ReservationsWithTags(ctx, Tags(m.clusterID, svc.Namespace, svc.Name)...)
	if err != nil {
		return m.fail(svc, fmt.Errorf("looking up the Service's Elastic IP: %w", err))
	}
	var done []string
	for _, r := range own {
		if err := m.api.DeleteIP(ctx, r.GetId()); err != nil {
			return m.fail(svc, fmt.Errorf("releasing Elastic IP %s: %w", r.GetAddress(), err))
		}
		m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonReleased, "Released Elastic IP %s", r.GetAddress())
		done = append(done, r.GetAddress())
	}
	if key := SharingKey(svc); key != "" {
		addrs, err := m.releaseShared(ctx, svc, SharingTag(key))
		if err != nil {
			return err
		}
		done = append(done, addrs...)
	}
	return m.leave(ctx, svc, done...)
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
		m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonDuplicate, "%d Elastic IP reservations carry %s; using %s, the oldest; release the others in the Equinix Metal console", len(sorted), whose, sorted[0].GetAddress())
	}
	return &sorted[0]
}

func (m *Manager) fail(svc *v1.Service, err error) error {
	m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonFailed, "%v", err)
	return err
}

func pending(r *metalv1.IPReservation) bool {
	return r.GetState() == "pending" || r.GetAddress() == ""
}
