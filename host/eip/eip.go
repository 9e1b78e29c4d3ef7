package eip

import (
	"context"
	"sync"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
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

// Event reasons of the two address problems.
const (
	// ReasonInvalidIP: spec.loadBalancerIP is no address the CCM can serve.
	ReasonInvalidIP = "InvalidLoadBalancerIP"
	// ReasonLost: the Service's own reservation no longer exists.
	ReasonLost = "ElasticIPLost"
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
	// family is the address family of a view (view, in common.go): "" for the
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
	// beforePublish, if set, is told a Service's addresses before the
	// CCM first writes them into it (SetBeforePublish).
	beforePublish func(ctx context.Context, svc *v1.Service, ips []string)
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

// SetBeforePublish gives the Manager a function it calls with a Service's
// Elastic IPs before it first writes them into the Service
// (spec.loadBalancerIP, or AnnotationLoadBalancerIPs), and which may block
// for a while: the load balancer's own configuration for the addresses
// (MetalLB's pool) can then be in place when the Service asks for them.
// MetalLB's controller allocates an address it has no pool for only when
// its configuration next changes, which in a burst of new Services is
// seconds later (host/provider's staging, ARCHITECTURE.md).
func (m *Manager) SetBeforePublish(f func(ctx context.Context, svc *v1.Service, ips []string)) {
	m.beforePublish = f
}

// announceAhead calls the beforePublish function, if any.
func (m *Manager) announceAhead(ctx context.Context, svc *v1.Service, ips []string) {
	if m.beforePublish != nil {
		m.beforePublish(ctx, svc, ips)
	}
}

var (
	lostTotal = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "equinix_metal_eip_lost_total",
		Help:           "Service Elastic IP reservations found deleted outside the CCM (the Service then got a new Elastic IP).",
		StabilityLevel: metrics.ALPHA,
	})
	invalidIPTotal = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "equinix_metal_eip_invalid_load_balancer_ip_total",
		Help:           "Syncs of a Service whose spec.loadBalancerIP is not an address the CCM can serve.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(lostTotal, invalidIPTotal) })
}
