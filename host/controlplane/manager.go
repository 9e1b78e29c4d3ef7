// Package controlplane keeps the control-plane Elastic IP — the Equinix
// Metal reservation carrying the configured eipTag — assigned to a
// control-plane node whose kube-apiserver answers, and makes the EIP
// routable inside the cluster through a LoadBalancer Service whose
// endpoints mirror default/kubernetes.
//
// The policy is the pure function Decide; this file is the I/O around it:
// informers for Nodes and default/kubernetes, a probe round every interval,
// and the Equinix calls that carry out a decision. Only the leader runs it
// (the provider's Initialize runs after leader election), so a replica on a
// surviving node takes over when the holder's node dies with the leader on
// it (upstream issue #304).
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

// MetalAPI is the part of the Equinix Metal API the manager uses.
type MetalAPI interface {
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
}

// Options configure a Manager. Zero values take the defaults named below.
type Options struct {
	// EIPTag is the tag of the control-plane EIP reservation. Required.
	EIPTag string
	// APIServerPort is the port of the EIP; 0 uses the kube-apiserver's
	// port (the targetPort of default/kubernetes).
	APIServerPort int
	// UseHostIP probes the holder node's own addresses instead of the EIP;
	// needed when the EIP is bound to a loopback interface on the nodes.
	UseHostIP bool
	// Interval between probe rounds; default 2s.
	Interval time.Duration
	// FastInterval is the interval while the holder has failed some probes
	// but not yet Failures of them, so that a dead holder is confirmed
	// quickly while one slow answer still moves nothing; default
	// Interval/4.
	FastInterval time.Duration
	// Timeout of one probe; default 1s.
	Timeout time.Duration
	// Failures is how many consecutive failed probes move the EIP; default 3.
	Failures int
	// Rise is how many consecutive passed probes make a node eligible to
	// receive the EIP; default 2.
	Rise int
	// Grace after the holder changed during which failed probes of the EIP
	// do not count, while the network learns the new route; default
	// 5×Interval when probing the EIP, 0 with UseHostIP.
	Grace time.Duration
	// Resync is how often the reservation is re-read from Equinix and the
	// external Service re-applied even when nothing seemed to change;
	// default 30s.
	Resync time.Duration
	// Dial replaces the probes' dialer (tests route the EIP with it).
	Dial DialFunc
}

// OptionsFromConfig maps the validated configuration onto Options.
func OptionsFromConfig(cfg *config.Config) Options {
	return Options{
		EIPTag:        cfg.EIPTag,
		APIServerPort: cfg.APIServerPort,
		UseHostIP:     cfg.EIPHealthCheckUseHostIP,
		Interval:      cfg.HealthCheckInterval,
		Timeout:       cfg.HealthCheckTimeout,
		Failures:      cfg.HealthCheckFailures,
	}
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.FastInterval <= 0 {
		o.FastInterval = o.Interval / 4
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Failures < 1 {
		o.Failures = 3
	}
	if o.Rise < 1 {
		o.Rise = 2
	}
	if o.Grace <= 0 && !o.UseHostIP {
		o.Grace = 5 * o.Interval
	}
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	return o
}

// Event reasons, on the external Service.
const (
	ReasonMoved        = "ControlPlaneEIPMoved"
	ReasonTrimmed      = "ControlPlaneEIPDuplicateRemoved"
	ReasonAssigned     = "ControlPlaneEIPAssigned"
	ReasonUnhealthy    = "ControlPlaneUnhealthy"
	ReasonRecovered    = "ControlPlaneRecovered"
	ReasonFailoverFail = "ControlPlaneEIPFailoverFailed"
	ReasonEIPNotFound  = "ControlPlaneEIPNotFound"
)

// Status is a snapshot of what the manager last saw and did.
type Status struct {
	EIP string
	// HolderNode is the node holding the EIP; "" when unassigned, assigned
	// more than once, or to a device that is no control-plane node.
	HolderNode   string
	HolderDevice string
	Assignments  int
	HealthyNodes int
	Last         Decision
	// Rounds counts finished probe rounds.
	Rounds int
	// Err is the last error that stopped a round, "" after a good round.
	Err string
}

// Manager runs the control-plane EIP loop.
type Manager struct {
	opts     Options
	metal    MetalAPI
	kube     kubernetes.Interface
	recorder record.EventRecorder
	prober   *Prober

	shared      informers.SharedInformerFactory
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
	eipHealth    Health
	holderKey    string
	holderSince  time.Time
	firstFailure time.Time
	lastProbe    time.Time
	nodeHealth   map[string]Health
	lastReport   string
	// lastFindEvent is the last Event about the tag lookup, to send it once.
	lastFindEvent string
	externAt      time.Time
	externEIP     string
	externPort    int
	serviceRef    *v1.ObjectReference

	statusMu sync.Mutex
	status   Status
}

type reservation struct {
	id, address string
	assignments []Assignment
	readAt      time.Time
}

// New builds a Manager. shared provides the Node informer (nil: the
// manager makes its own); the default/kubernetes Service and its
// EndpointSlices come from a small informer factory of the manager's own,
// limited to those objects. recorder may be nil.
func New(opts Options, metal MetalAPI, kube kubernetes.Interface, shared informers.SharedInformerFactory, recorder record.EventRecorder) *Manager {
	opts = opts.withDefaults()
	if shared == nil {
		shared = informers.NewSharedInformerFactory(kube, 0)
	}
	m := &Manager{
		opts: opts, metal: metal, kube: kube, recorder: recorder,
		prober:      NewProber(opts.Timeout, opts.Dial),
		shared:      shared,
		wake:        make(chan struct{}, 1),
		dirtyExtern: true,
		nodeHealth:  map[string]Health{},
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
	m.own = []informers.SharedInformerFactory{svcFactory, sliceFactory}
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
			if n, ok := obj.(*v1.Node); ok && IsControlPlaneNode(n) {
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

// Status returns a snapshot of the manager's view.
func (m *Manager) Status() Status {
	m.statusMu.Lock()
	defer m.statusMu.Unlock()
	return m.status
}

func (m *Manager) setStatus(f func(*Status)) {
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

// start runs the informers (until ctx ends) and waits for their caches.
func (m *Manager) start(ctx context.Context) error {
	registerMetrics()
	m.shared.Start(ctx.Done())
	for _, f := range m.own {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), m.synced...) && ctx.Err() == nil {
		return fmt.Errorf("control-plane EIP: the Node, Service and EndpointSlice informers did not sync")
	}
	return nil
}

// round is one pass: read what changed, probe, decide, act. It returns the
// delay until the next round.
func (m *Manager) round(ctx context.Context, now time.Time) time.Duration {
	logger := klog.FromContext(ctx)
	next, err := m.roundErr(ctx, now)
	msg := ""
	if err != nil {
		msg = err.Error()
		// The same error every round is logged once, then quietly.
		if msg != m.Status().Err {
			logger.Error(err, "Control-plane EIP round failed")
		} else {
			logger.V(4).Info("Control-plane EIP round failed again", "err", msg)
		}
	}
	m.setStatus(func(s *Status) { s.Rounds++; s.Err = msg })
	return next
}

func (m *Manager) roundErr(ctx context.Context, now time.Time) (time.Duration, error) {
	src, err := m.services.Services(kubernetesNamespace).Get(kubernetesName)
	if err != nil {
		src = nil
	}
	srcSlices, _ := m.slices.EndpointSlices(kubernetesNamespace).List(labels.Everything())
	targetPort, err := apiServerTargetPort(src, srcSlices)
	if err != nil {
		return m.opts.Interval, err
	}
	port := m.opts.APIServerPort
	if port == 0 {
		port = targetPort
	}

	if m.res.id == "" || now.Sub(m.res.readAt) >= m.opts.Resync {
		if err := m.refresh(ctx, now); err != nil {
			var te tagError
			if errors.As(err, &te) {
				// Someone must tag an EIP first; a full listing every
				// interval would only use up the API's rate limit.
				return m.opts.Resync, err
			}
			return m.opts.Interval, err
		}
	}
	if err := m.syncExternal(ctx, now, src, srcSlices, targetPort); err != nil {
		// Routing inside the cluster is broken, but the EIP assignment is
		// independent of it: go on with the round.
		klog.FromContext(ctx).Error(err, "Could not apply the external control-plane Service")
	}

	// Facts about the nodes.
	all, err := m.nodes.List(labels.Everything())
	if err != nil {
		return m.opts.Interval, fmt.Errorf("listing nodes: %w", err)
	}
	var cp []*v1.Node
	for _, n := range all {
		if IsControlPlaneNode(n) {
			cp = append(cp, n)
		}
	}
	slices.SortFunc(cp, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	holderNode := ""
	if len(m.res.assignments) == 1 {
		for _, n := range cp {
			if nodeState(n, Health{}).DeviceID == m.res.assignments[0].DeviceID {
				holderNode = n.Name
			}
		}
	}

	// Probe: the EIP (unless UseHostIP) and every other control-plane node,
	// all at once.
	var targets []Target
	probeEIP := !m.opts.UseHostIP && len(m.res.assignments) == 1
	if probeEIP {
		targets = append(targets, Target{Key: "", Hosts: []string{m.res.address}, Port: port})
	}
	for _, n := range cp {
		if probeEIP && n.Name == holderNode {
			continue
		}
		targets = append(targets, Target{Key: n.Name, Hosts: probeAddresses(n, m.res.address), Port: targetPort})
	}
	// A round woken by a node event soon after the last probes decides on
	// their results instead of probing again: two probes a few
	// milliseconds apart would count one outage twice and shorten the
	// hysteresis.
	probeNow := m.lastProbe.IsZero() || now.Sub(m.lastProbe) >= m.opts.FastInterval
	var results map[string]error
	if probeNow {
		results = m.prober.ProbeAll(ctx, targets)
		if ctx.Err() != nil {
			return 0, nil
		}
		m.lastProbe = now
	}
	present := map[string]bool{}
	var states []NodeState
	healthyNodes := 0
	for _, n := range cp {
		present[n.Name] = true
		if err, probed := results[n.Name]; probed {
			m.nodeHealth[n.Name] = m.nodeHealth[n.Name].Record(err == nil)
			recordProbe(n.Name, err)
			if err != nil {
				klog.FromContext(ctx).V(4).Info("Control-plane node probe failed", "node", n.Name, "err", err)
			}
		} else if probeNow {
			// The holder, probed through the EIP: its own history starts
			// afresh when it stops being the holder.
			delete(m.nodeHealth, n.Name)
		}
		h := m.nodeHealth[n.Name]
		if h.Healthy() {
			healthyNodes++
		}
		states = append(states, nodeState(n, h))
	}
	for name := range m.nodeHealth {
		if !present[name] {
			delete(m.nodeHealth, name)
		}
	}
	holderHealth := m.nodeHealth[holderNode]
	if probeEIP {
		if err, probed := results[""]; probed {
			m.eipHealth = m.eipHealth.Record(err == nil)
			recordProbe("eip", err)
			if err != nil {
				klog.FromContext(ctx).V(2).Info("Control-plane EIP probe failed", "eip", m.res.address, "failures", m.eipHealth.Failures, "err", err)
			}
		}
		holderHealth = m.eipHealth
	}
	if probeNow {
		if holderHealth.Failures == 1 {
			m.firstFailure = now
		} else if holderHealth.Failures == 0 {
			m.firstFailure = time.Time{}
		}
	}
	metricHealthyNodes.Set(float64(healthyNodes))

	d := Decide(Input{
		Now: now, Assignments: m.res.assignments, HolderHealth: holderHealth,
		HolderSince: m.holderSince, Nodes: states,
		Policy: Policy{Failures: m.opts.Failures, Rise: m.opts.Rise, Grace: m.opts.Grace},
	})
	m.setStatus(func(s *Status) {
		s.EIP, s.HolderNode, s.Assignments, s.HealthyNodes, s.Last = m.res.address, holderNode, len(m.res.assignments), healthyNodes, d
		s.HolderDevice = ""
		if len(m.res.assignments) == 1 {
			s.HolderDevice = m.res.assignments[0].DeviceID
		}
	})
	m.publishHolder(holderNode)

	switch d.Kind {
	case Keep:
		metricStuck.Set(0)
		if m.lastReport != "" {
			m.event(v1.EventTypeNormal, ReasonRecovered, "The control-plane EIP %s is on a healthy node again (%s)", m.res.address, holderNode)
			m.lastReport = ""
		}
	case Stuck:
		metricStuck.Set(1)
		// Once per situation, not once per round: the reason's failure
		// count grows every round.
		if key := d.Cause + "/" + m.holderKey; key != m.lastReport {
			klog.FromContext(ctx).Info("Control-plane EIP cannot move", "reason", d.Reason)
			m.event(v1.EventTypeWarning, ReasonUnhealthy, "Control-plane EIP %s: %s", m.res.address, d.Reason)
			m.lastReport = key
		}
	default:
		metricStuck.Set(0)
		m.lastReport = ""
		if err := m.execute(ctx, d, now, holderNode); err != nil {
			metricFailoverErrors.Inc()
			m.event(v1.EventTypeWarning, ReasonFailoverFail, "Control-plane EIP %s: %s failed (the next round retries): %v", m.res.address, d.Kind, err)
			// Read the truth again and retry soon: whatever half of the
			// change went through, the next decision repairs it.
			m.res.readAt = time.Time{}
			return m.opts.FastInterval, err
		}
		return m.opts.FastInterval, nil
	}
	if holderHealth.Failures > 0 && holderHealth.Failures < m.opts.Failures {
		return m.opts.FastInterval, nil
	}
	return m.opts.Interval, nil
}

func recordProbe(target string, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	metricProbes.WithLabelValues(target, result).Inc()
}

// publishHolder keeps exactly one eip_holder series at 1.
func (m *Manager) publishHolder(node string) {
	metricHolder.Reset()
	if len(m.res.assignments) == 1 {
		metricHolder.WithLabelValues(node).Set(1)
	}
	metricAssignments.Set(float64(len(m.res.assignments)))
}

// refresh reads the reservation: its ID by tag (possibly cached), then the
// reservation itself, fresh.
func (m *Manager) refresh(ctx context.Context, now time.Time) error {
	if m.res.id == "" {
		found, err := m.find(ctx)
		if err != nil {
			return err
		}
		m.res.id = found
	}
	r, err := m.metal.Reservation(ctx, m.res.id)
	if err != nil {
		// Perhaps the reservation was deleted and another carries the tag
		// now: look it up by tag again next time.
		m.res.id = ""
		return fmt.Errorf("reading the control-plane EIP reservation: %w", err)
	}
	m.observe(r, now)
	return nil
}

// find returns the ID of the one reservation carrying the tag.
func (m *Manager) find(ctx context.Context) (string, error) {
	match, err := m.lookup(ctx, m.metal.ReservationsWithTags)
	if err == nil && len(match) != 1 {
		// The cache may predate the tag: ask the API before complaining.
		match, err = m.lookup(ctx, m.metal.ReservationsWithTagsFresh)
	}
	if err != nil {
		return "", err
	}
	switch len(match) {
	case 0:
		m.eventOnce(ReasonEIPNotFound, "No Elastic IP carries the tag %q", m.opts.EIPTag)
		return "", tagError{fmt.Errorf("no Elastic IP reservation in the project carries the tag %q (eipTag); tag the control-plane EIP with it, or unset eipTag to turn control-plane EIP management off", m.opts.EIPTag)}
	case 1:
		m.lastFindEvent = ""
		return match[0].GetId(), nil
	}
	var names []string
	for _, r := range match {
		names = append(names, fmt.Sprintf("%s (%s)", r.GetAddress(), r.GetId()))
	}
	m.eventOnce(ReasonEIPNotFound, "%d Elastic IPs carry the tag %q", len(match), m.opts.EIPTag)
	return "", tagError{fmt.Errorf("%d Elastic IP reservations carry the tag %q (eipTag): %s; remove the tag from all but the control-plane EIP",
		len(match), m.opts.EIPTag, strings.Join(names, ", "))}
}

// tagError is a lookup that found no reservation, or several: the user
// must fix the tags.
type tagError struct{ error }

func (e tagError) Unwrap() error { return e.error }

func (m *Manager) lookup(ctx context.Context, list func(context.Context, ...string) ([]metalv1.IPReservation, error)) ([]metalv1.IPReservation, error) {
	rs, err := list(ctx, m.opts.EIPTag)
	if err != nil {
		return nil, fmt.Errorf("looking up the control-plane EIP by tag %q: %w", m.opts.EIPTag, err)
	}
	var match []metalv1.IPReservation
	for _, r := range rs {
		if slices.Contains(r.Tags, m.opts.EIPTag) {
			match = append(match, r)
		}
	}
	return match, nil
}

// observe records a freshly read reservation.
func (m *Manager) observe(r *metalv1.IPReservation, now time.Time) {
	m.res.address = r.GetAddress()
	m.res.assignments = assignmentsOf(r)
	m.res.readAt = now
	m.setHolder(now)
}

// setHolder notes a change of holder: the EIP's probe history belongs to
// the device it was routed to, so it starts again, and so does the grace.
func (m *Manager) setHolder(now time.Time) {
	var ids []string
	for _, a := range m.res.assignments {
		ids = append(ids, a.DeviceID)
	}
	slices.Sort(ids)
	key := strings.Join(ids, ",")
	if key != m.holderKey || m.holderSince.IsZero() {
		m.holderKey = key
		m.holderSince = now
		m.eipHealth = Health{}
		m.firstFailure = time.Time{}
	}
}

// assignmentsOf lists the live assignments of a reservation. One being
// deleted is already on its way out and does not count.
func assignmentsOf(r *metalv1.IPReservation) []Assignment {
	var out []Assignment
	for _, a := range r.Assignments {
		if a.State != nil && *a.State == metalv1.IPASSIGNMENTSTATE_DELETING {
			continue
		}
		dev := ""
		if a.AssignedTo != nil {
			dev = deviceIDFromHref(a.AssignedTo.Href)
		}
		out = append(out, Assignment{ID: a.GetId(), DeviceID: dev})
	}
	slices.SortFunc(out, func(a, b Assignment) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// execute carries out a Move, Assign or Trim. It first re-reads the
// reservation: when the assignments are no longer those the decision was
// made on (someone else moved the EIP, or an earlier call went through
// though its answer was lost), it does nothing and the next round decides
// again on the new facts.
func (m *Manager) execute(ctx context.Context, d Decision, now time.Time, fromNode string) error {
	logger := klog.FromContext(ctx)
	decidedOn := m.res.assignments
	r, err := m.metal.Reservation(ctx, m.res.id)
	if err != nil {
		return fmt.Errorf("re-reading the reservation before changing it: %w", err)
	}
	fresh := assignmentsOf(r)
	if !slices.Equal(fresh, decidedOn) {
		logger.Info("Control-plane EIP assignments changed under us; deciding again", "was", decidedOn, "now", fresh)
		m.observe(r, now)
		return nil
	}
	m.res.address = r.GetAddress()
	for _, a := range d.Unassign {
		if err := m.metal.DeleteIP(ctx, a.ID); err != nil {
			return fmt.Errorf("unassigning %s from device %s: %w", m.res.address, a.DeviceID, err)
		}
		m.res.assignments = slices.DeleteFunc(m.res.assignments, func(x Assignment) bool { return x.ID == a.ID })
		logger.Info("Unassigned the control-plane EIP", "eip", m.res.address, "device", a.DeviceID, "reason", d.Reason)
	}
	if d.Kind == Trim {
		m.setHolder(now)
		m.event(v1.EventTypeNormal, ReasonTrimmed, "Control-plane EIP %s: %s", m.res.address, d.Reason)
		metricFailovers.WithLabelValues(d.Cause).Inc()
		return nil
	}
	as, err := m.metal.AssignIP(ctx, d.Target.DeviceID, m.res.address)
	if err != nil {
		return fmt.Errorf("assigning %s to node %s (device %s): %w", m.res.address, d.Target.Name, d.Target.DeviceID, err)
	}
	m.res.assignments = []Assignment{{ID: as.GetId(), DeviceID: d.Target.DeviceID}}
	m.res.readAt = now
	first := m.firstFailure
	m.setHolder(now)
	metricFailovers.WithLabelValues(d.Cause).Inc()
	if d.Cause == CauseUnhealthy && !first.IsZero() {
		metricFailoverSeconds.Observe(time.Since(first).Seconds())
	}
	m.publishHolder(d.Target.Name)
	m.setStatus(func(s *Status) { s.HolderNode, s.HolderDevice, s.Assignments = d.Target.Name, d.Target.DeviceID, 1 })
	if d.Kind == Assign {
		logger.Info("Assigned the control-plane EIP", "eip", m.res.address, "node", d.Target.Name, "reason", d.Reason)
		m.event(v1.EventTypeNormal, ReasonAssigned, "Assigned the control-plane EIP %s to node %s: %s", m.res.address, d.Target.Name, d.Reason)
		return nil
	}
	from := fromNode
	if from == "" {
		from = "device " + d.Unassign[0].DeviceID
	}
	logger.Info("Moved the control-plane EIP", "eip", m.res.address, "from", from, "to", d.Target.Name, "reason", d.Reason)
	m.event(v1.EventTypeNormal, ReasonMoved, "Moved the control-plane EIP %s from %s to node %s: %s", m.res.address, from, d.Target.Name, d.Reason)
	return nil
}

// eventOnce records a Warning unless the previous lookup recorded the same.
func (m *Manager) eventOnce(reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if msg == m.lastFindEvent {
		return
	}
	m.lastFindEvent = msg
	m.event(v1.EventTypeWarning, reason, "%s", msg)
}

// event records an Event on the external Service; before that exists
// (the EIP was not found yet) on default/kubernetes, where someone looking
// for why the control plane has no EIP would look next.
func (m *Manager) event(typ, reason, format string, args ...any) {
	if m.recorder == nil {
		return
	}
	ref := m.serviceRef
	if ref == nil {
		ref = &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: kubernetesNamespace, Name: kubernetesName}
		if src, err := m.services.Services(kubernetesNamespace).Get(kubernetesName); err == nil {
			ref.UID = src.UID
		}
	}
	m.recorder.Eventf(ref, typ, reason, format, args...)
}
