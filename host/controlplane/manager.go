// Package controlplane keeps the control-plane Elastic IP — the Equinix
// Metal reservation carrying the configured eipTag — assigned to a
// control-plane node whose kube-apiserver answers, and makes the EIP
// routable inside the cluster through a LoadBalancer Service whose
// endpoints mirror default/kubernetes.
//
// The policy is the pure function Decide (decide.go); the rest is the I/O
// around it: informers for Nodes and default/kubernetes (manager.go), a
// round every interval that gathers, probes, decides and acts (round.go),
// the reservation as read from Equinix (reservation.go), and the Equinix
// calls that carry out a decision (failover.go). Only the leader runs it
// (the provider's Initialize runs after leader election), so a replica on a
// surviving node takes over when the holder's node dies with the leader on
// it (upstream issue #304).
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package controlplane

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// metalAPI is the part of the Equinix Metal API the manager uses.
type metalAPI interface {
	// ReservationsWithTags returns the project's IP reservations that carry
	// every tag. It may answer from a cache: it is used only to find the
	// reservation's ID.
	ReservationsWithTags(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error)
	// ReservationsWithTagsFresh is the same from a new listing; it confirms
	// a cached answer that found no reservation, or more than one, before
	// that is reported.
	ReservationsWithTagsFresh(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error)
	// Reservation reads one reservation with its assignments from the API
	// (GET /ips/{id}?include=assignments), bypassing any cache: decisions
	// are made on what it returns.
	Reservation(ctx context.Context, id string) (*metalv1.IPReservation, error)
	// DeleteIP with an assignment's ID unassigns the EIP from its device
	// (DELETE /ips/{assignment-id}).
	DeleteIP(ctx context.Context, id string) error
	// AssignIP assigns address to the device (POST /devices/{id}/ips).
	AssignIP(ctx context.Context, deviceID, address string) (*metalv1.IPAssignment, error)
	// Device returns a device (for its metro); it may answer from a cache.
	Device(ctx context.Context, id string) (*metalv1.Device, error)
	// DeviceFresh GETs a device whatever a cache holds: a move checks its
	// target with it before unassigning the holder.
	DeviceFresh(ctx context.Context, id string) (*metalv1.Device, error)
}

// status is a snapshot of what the manager last saw and did.
type status struct {
	EIP string
	// HolderNode is the node holding the EIP; "" when unassigned, assigned
	// more than once, or to a device that is no control-plane node.
	HolderNode   string
	HolderDevice string
	Assignments  int
	HealthyNodes int
	Last         decision
	// Rounds counts finished probe rounds.
	Rounds int
	// Err is the last error that stopped a round, "" after a good round.
	Err string
}

// Manager runs the control-plane EIP loop: it keeps the EIP on a
// control-plane node whose kube-apiserver answers, and the Service that
// routes it inside the cluster in step with default/kubernetes. New
// builds one and Run runs it until its context ends; it holds the
// informers and what one round leaves for the next (the holder, each
// node's probe history). The provider starts one, on the leader only.
type Manager struct {
	opts     Options
	metal    metalAPI
	kube     kubernetes.Interface
	recorder record.EventRecorder
	prober   *prober

	own         []informers.SharedInformerFactory
	nodes       corelisters.NodeLister
	services    corelisters.ServiceLister
	slices      discoverylisters.EndpointSliceLister
	synced      []cache.InformerSynced
	wake        chan struct{}
	dirtyMu     sync.Mutex
	dirtyExtern bool

	// Loop state, touched only by the Run goroutine.
	res          reservation
	eipHealth    health
	holderKey    string
	holderSince  time.Time
	firstFailure time.Time
	lastProbe    time.Time
	nodeHealth   map[string]health
	lastReport   string
	// lastFindEvent is the last Event about the tag lookup, to send it once.
	lastFindEvent string
	externAt      time.Time
	externEIP     string
	externPort    int
	serviceRef    *v1.ObjectReference

	statusMu sync.Mutex
	status   status
}

// New builds a Manager. shared provides the Node informer and is started by
// whoever owns it (nil: the manager makes and starts its own); the default/kubernetes Service and its
// EndpointSlices come from a small informer factory of the manager's own,
// limited to those objects. recorder may be nil.
func New(opts Options, metal metalAPI, kube kubernetes.Interface, shared informers.SharedInformerFactory, recorder record.EventRecorder) *Manager {
	opts = opts.withDefaults()
	var own []informers.SharedInformerFactory
	if shared == nil {
		shared = informers.NewSharedInformerFactory(kube, 0)
		own = append(own, shared)
	}
	m := &Manager{
		opts: opts, metal: metal, kube: kube, recorder: recorder,
		prober:      newProber(opts.Timeout, opts.Dial),
		wake:        make(chan struct{}, 1),
		dirtyExtern: true,
		nodeHealth:  map[string]health{},
	}
	// Only default/kubernetes and its slices: watching every Service and
	// EndpointSlice of the cluster for one object would cost memory that
	// grows with the cluster.
	svcFactory := informers.NewSharedInformerFactoryWithOptions(kube, opts.Resync,
		informers.WithNamespace(kubernetesNamespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", kubernetesName).String()
		}))
	sliceFactory := informers.NewSharedInformerFactoryWithOptions(kube, opts.Resync,
		informers.WithNamespace(kubernetesNamespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: kubernetesName}).String()
		}))
	m.own = append(own, svcFactory, sliceFactory)
	svcInf := svcFactory.Core().V1().Services()
	sliceInf := sliceFactory.Discovery().V1().EndpointSlices()
	nodeInf := shared.Core().V1().Nodes()

	m.nodes = nodeInf.Lister()
	m.services = svcInf.Lister()
	m.slices = sliceInf.Lister()
	m.synced = []cache.InformerSynced{nodeInf.Informer().HasSynced, svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced}

	markExtern := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { m.markExternalDirty() },
		UpdateFunc: func(any, any) { m.markExternalDirty() },
		DeleteFunc: func(any) { m.markExternalDirty() },
	}
	_, _ = svcInf.Informer().AddEventHandler(markExtern)
	_, _ = sliceInf.Informer().AddEventHandler(markExtern)
	_, _ = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok && isControlPlaneNode(n) {
				m.poke()
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Node)
			c, ok2 := cur.(*v1.Node)
			if ok1 && ok2 && relevantNodeChange(o, c) {
				m.poke()
			}
		},
		DeleteFunc: func(any) { m.poke() },
	})
	return m
}

func (m *Manager) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Manager) markExternalDirty() {
	m.dirtyMu.Lock()
	m.dirtyExtern = true
	m.dirtyMu.Unlock()
	m.poke()
}

func (m *Manager) takeExternalDirty() bool {
	m.dirtyMu.Lock()
	defer m.dirtyMu.Unlock()
	d := m.dirtyExtern
	m.dirtyExtern = false
	return d
}

// snapshot returns a copy of the manager's view.
func (m *Manager) snapshot() status {
	m.statusMu.Lock()
	defer m.statusMu.Unlock()
	return m.status
}

func (m *Manager) setStatus(f func(*status)) {
	m.statusMu.Lock()
	f(&m.status)
	m.statusMu.Unlock()
}

// Run probes and acts until ctx ends. It returns at once, with an error,
// when the options are unusable or the informers cannot sync.
func (m *Manager) Run(ctx context.Context) error {
	if strings.TrimSpace(m.opts.EIPTag) == "" {
		return fmt.Errorf("control-plane EIP: eipTag is empty; set eipTag (METAL_EIP_TAG) to the tag of the control-plane Elastic IP, or do not start the control-plane manager")
	}
	logger := klog.FromContext(ctx).WithName("controlplane")
	ctx = klog.NewContext(ctx, logger)
	if err := m.start(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	logger.Info("Control-plane EIP manager started", "eipTag", m.opts.EIPTag, "interval", m.opts.Interval,
		"failures", m.opts.Failures, "useHostIP", m.opts.UseHostIP)

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-m.wake:
		}
		start := time.Now()
		delay := m.round(ctx, start)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(0, time.Until(start.Add(delay))))
	}
}

// start runs its own informers (until ctx ends) and waits for every cache.
// A shared factory is started by its owner: the framework starts its own
// once its controllers have asked for their resync periods.
func (m *Manager) start(ctx context.Context) error {
	registerMetrics()
	for _, f := range m.own {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), m.synced...) && ctx.Err() == nil {
		return fmt.Errorf("control-plane EIP: the Node, Service and EndpointSlice informers did not sync")
	}
	return nil
}
