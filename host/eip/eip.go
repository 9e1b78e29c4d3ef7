package eip

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/keymutex"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// api is what the EIP lifecycle needs from Equinix Metal. Lookups by tags
// are answered from the client's cache, so a Service with nothing to change
// costs no API call.
type api interface {
	ReservationsWithTags(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error)
	// RequestReservation must be idempotent by tags: it looks them up before
	// creating (re-reading the project after a lost response), so a retry
	// reserves nothing twice.
	RequestReservation(ctx context.Context, r metal.ReservationRequest) (*metalv1.IPReservation, error)
	Reservation(ctx context.Context, id string) (*metalv1.IPReservation, error)
	DeleteIP(ctx context.Context, id string) error
	// ReservationHolding is the project's Elastic IP reservation that holds
	// an address (its /32 or a block around it), nil for none, from the
	// cache: whether a user's own address is the project's to serve.
	ReservationHolding(ctx context.Context, addr string) (*metalv1.IPReservation, error)
	// ProjectID names the project in messages.
	ProjectID() string
}

// Event reasons, one per step of an Elastic IP's life.
const (
	ReasonRequested = "ElasticIPRequested"
	ReasonReserved  = "ElasticIPReserved"
	reasonPending   = "ElasticIPPending"
	ReasonAssigned  = "ElasticIPAssigned"
	reasonReleased  = "ElasticIPReleased"
	ReasonFailed    = "ElasticIPFailed"
	reasonDuplicate = "ElasticIPDuplicate"
)

// Event reasons of shared Elastic IPs.
const (
	// ReasonShareRefused: the Service may not have its sharing key's
	// address (ports clash, traffic policies differ, another location).
	ReasonShareRefused = "ElasticIPShareRefused"
	// ReasonShareKept: the Service let go of a shared Elastic IP that other
	// Services of the key still use, so it stays reserved.
	ReasonShareKept = "ElasticIPKept"
)

// Manager runs the lifecycle.
type Manager struct {
	api       api
	kube      kubernetes.Interface
	placer    Placer
	recorder  record.EventRecorder
	clusterID string
	// services tells who else has a sharing key (SetServices).
	services Services
	// keys serialises the work on one sharing key (by its tag).
	keys keymutex.KeyMutex
	// prefixCap, if set, refuses a new Elastic IP past the BGP prefix
	// limit (prefixcap.go); capMu makes its count and the reservation one
	// step.
	prefixCap *PrefixCap
	capMu     *sync.Mutex
	// family is the address family of a view (family.go): "" for the
	// Manager itself, which Ensure, Release and Current use.
	family v1.IPFamily
	// noLBIPField: in a view, publish leaves spec.loadBalancerIP alone: it
	// holds the user's address of the other family, or the Service has
	// IPv6 and its addresses go into AnnotationLoadBalancerIPs instead.
	noLBIPField bool
	// noIPv6LB, when set, is why the load-balancer integration cannot
	// announce IPv6 (SetIPv6Unsupported): no IPv6 Elastic IP is given.
	noIPv6LB string
	// PendingRetry is how soon the service controller retries a Service
	// whose reservation Equinix has not approved yet.
	PendingRetry time.Duration
}

// NewManager returns a Manager for the cluster whose kube-system namespace
// has the UID clusterID.
func NewManager(api api, kube kubernetes.Interface, placer Placer, recorder record.EventRecorder, clusterID string) *Manager {
	registerMetrics()
	return &Manager{api: api, kube: kube, placer: placer, recorder: recorder, clusterID: clusterID, keys: keymutex.NewHashed(64), capMu: &sync.Mutex{}, PendingRetry: 10 * time.Second}
}

// Services is how the Manager reads the cluster's Services to know who else
// has a sharing key: List from an informer (cheap, possibly a little behind)
// and Synced, whether it has been filled. Without List, every read is a
// live, paged list from the API server.
type Services struct {
	List   func() ([]*v1.Service, error)
	Synced func() bool
}

// SetServices gives the Manager the cluster's Services (an informer).
func (m *Manager) SetServices(s Services) { m.services = s }

// SetIPv6Unsupported tells the Manager that the load-balancer integration
// cannot announce IPv6, and why (config.LoadBalancer.IPv6Unsupported): a
// Service's IPv6 family is then refused as where Equinix refuses it (a
// PreferDualStack Service gets IPv4 and says why), rather than given an
// address nothing announces, or, with MetalLB in native mode, one that
// makes MetalLB refuse its whole configuration. "" allows IPv6.
func (m *Manager) SetIPv6Unsupported(reason string) { m.noIPv6LB = reason }

// The lookups and the failure report that Ensure (ensure.go), Release
// (release.go) and Current (current.go) share.

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

// listServices are the cluster's Services from the informer, or from the
// API server without one.
func (m *Manager) listServices(ctx context.Context) ([]*v1.Service, error) {
	if m.services.List == nil {
		return m.liveServices(ctx)
	}
	if m.services.Synced != nil && !m.services.Synced() {
		return nil, fmt.Errorf("the CCM is still reading the cluster's Services (needed to share an Elastic IP); the Service is retried")
	}
	return m.services.List()
}

// liveServices lists every Service from the API server, a page at a time.
func (m *Manager) liveServices(ctx context.Context) ([]*v1.Service, error) {
	var out []*v1.Service
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := m.kube.CoreV1().Services("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

func (m *Manager) fail(svc *v1.Service, err error) error {
	var v6 *noIPv6
	if !isClusterWide(err) && !errors.As(err, &v6) { // Ensure reports noIPv6 itself
		m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonFailed, "%v", err)
	}
	return err
}

func pending(r *metalv1.IPReservation) bool {
	return r.GetState() == "pending" || r.GetAddress() == ""
}
