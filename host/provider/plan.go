package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/controlplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/instances"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/plan"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/policy"
)

// lbCleanupFinalizer is the service controller's finalizer: a Service that
// carries it has had a load balancer, which the controller releases.
const lbCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// Plan reports what a sync would change. It runs the CCM's own code — the
// Elastic IP lifecycle (eip.Manager), BGP project set-up, selection and
// annotations, the load-balancer module's reconciler — over the capturing
// layers of host/plan, against the cluster at restConfig and Equinix, both
// read-only. c must come from NewForPlan and is never started.
func (c *Cloud) Plan(ctx context.Context, restConfig *rest.Config) (*plan.Result, error) {
	ro := plan.ReadOnlyKube(restConfig, PlanUserAgent)
	kube, err := kubernetes.NewForConfig(ro)
	if err != nil {
		return nil, err
	}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the kube-system namespace UID (the cluster tag of Elastic IPs): %w", err)
	}
	clusterID := string(ns.UID)
	svcs, nodes, err := listAll(ctx, kube)
	if err != nil {
		return nil, err
	}
	all, err := c.metal.Reservations(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the project's IP reservations: %w", err)
	}
	res := &plan.Result{ClusterUID: clusterID, OrphanMode: c.cfg.OrphanEIPs, EIPs: []plan.EIP{}, Placement: []plan.Placement{},
		Orphans: eip.FindOrphans(all, clusterID, svcs), BGPSessions: []plan.BGPSession{},
		Annotations: []plan.NodeAnnotationChange{}, Objects: []lbmodule.Change{}, Warnings: []string{}, Later: []string{}}
	if res.Orphans == nil {
		res.Orphans = []eip.Orphan{}
	}
	if c.lb == nil {
		return res, nil // load balancing is off: no EIPs, BGP or module
	}
	mc := plan.NewMetal(c.metal)
	bgpNodes, err := c.planBGP(ctx, mc, nodes, res)
	if err != nil {
		return nil, err
	}
	p := &eipPlanner{c: c, mc: mc, all: all, res: res, rec: &plan.Recorder{}, kube: &plan.Kube{},
		placer: policyPlacer{engine: c.policies, cfg: c.cfg, nodes: nodeLister(nodes)}}
	addrs, err := p.run(ctx, ro, clusterID, svcs)
	if err != nil {
		return nil, err
	}
	if c.module != nil {
		if err := c.planModule(ctx, ro, kube, servicesAfter(svcs, addrs), bgpNodes, res); err != nil {
			return nil, fmt.Errorf("load-balancer module: %w", err)
		}
	}
	later(res)
	return res, nil
}

// later notes what depends on this sync's own writes.
func later(res *plan.Result) {
	if n := countAction(res.EIPs, plan.ActionReserve); n > 0 {
		res.Later = append(res.Later, fmt.Sprintf("the addresses of the %d Elastic IPs to reserve, and the load-balancer objects that announce them", n))
	}
	if n := len(res.BGPSessions); n > 0 {
		res.Later = append(res.Later, fmt.Sprintf("the BGP peers of the %d nodes whose session is to be created (Equinix reports a device's peers once it has a session), their peer annotations and the load-balancer objects that peer with them", n))
	}
}

func countAction(es []plan.EIP, action string) int {
	n := 0
	for _, e := range es {
		if e.Action == action {
			n++
		}
	}
	return n
}

func listAll(ctx context.Context, kube kubernetes.Interface) ([]*v1.Service, []*v1.Node, error) {
	sl, err := kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing Services: %w", err)
	}
	nl, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing Nodes: %w", err)
	}
	svcs := make([]*v1.Service, 0, len(sl.Items))
	for i := range sl.Items {
		svcs = append(svcs, &sl.Items[i])
	}
	sort.Slice(svcs, func(i, j int) bool { return id(svcs[i]) < id(svcs[j]) })
	nodes := make([]*v1.Node, 0, len(nl.Items))
	for i := range nl.Items {
		nodes = append(nodes, &nl.Items[i])
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return svcs, nodes, nil
}

func id(s *v1.Service) string { return s.Namespace + "/" + s.Name }

// nodeLister serves a listed set of nodes to the placement policy, as the
// informer's lister does in the running CCM.
func nodeLister(nodes []*v1.Node) corelisters.NodeLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		_ = idx.Add(n)
	}
	return corelisters.NewNodeLister(idx)
}

// wantsLoadBalancer is the service controller's rule for the Services it
// hands to EnsureLoadBalancer.
func wantsLoadBalancer(s *v1.Service) bool {
	return s.Spec.Type == v1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil
}

// needsCleanup is the service controller's rule for the Services it hands
// to EnsureLoadBalancerDeleted.
func needsCleanup(s *v1.Service) bool {
	return slices.Contains(s.Finalizers, lbCleanupFinalizer) && (s.DeletionTimestamp != nil || !wantsLoadBalancer(s))
}

// planBGP runs the project set-up, the selection policy and the per-node
// annotation rules, and returns the BGP nodes the module would get.
func (c *Cloud) planBGP(ctx context.Context, mc *plan.Metal, nodes []*v1.Node, res *plan.Result) ([]bgp.Node, error) {
	if _, err := bgp.EnableProject(ctx, mc, c.cfg.LocalASN, c.cfg.BGPPass); err != nil {
		return nil, err
	}
	if _, _, _, asn := mc.Take(); asn != nil {
		res.ProjectBGP = fmt.Sprintf("enable BGP on the project with ASN %d", *asn)
	}
	sel, err := policySelector{engine: c.policies, reqs: policy.SelectorRequirements(c.cfg.NodeSelector)}.SelectNodes(ctx, nodes)
	if err != nil {
		return nil, fmt.Errorf("BGP node selection: %w", err)
	}
	t := bgp.TemplatesFrom(c.cfg)
	var out []bgp.Node
	for _, n := range nodes {
		want := map[string]string{}
		if sel[n.Name] {
			if n.Spec.ProviderID == "" {
				continue // the node controller sets it first
			}
			deviceID, err := instances.DeviceID(n.Spec.ProviderID)
			if err != nil {
				continue // not an Equinix Metal node
			}
			bn, err := c.planNode(ctx, mc, n, deviceID, res)
			if err != nil {
				return nil, err
			}
			out = append(out, bn)
			want = bgp.Annotations(t, bn)
		}
		if ch, ok := annotationChange(n, bgp.AnnotationPatch(t, n.Annotations, want)); ok {
			res.Annotations = append(res.Annotations, ch)
		}
	}
	return out, nil
}

// planNode is the BGP controller's fetch of one node: its session, its
// neighbours and its device.
func (c *Cloud) planNode(ctx context.Context, mc *plan.Metal, n *v1.Node, deviceID string, res *plan.Result) (bgp.Node, error) {
	if err := mc.EnsureDeviceBGPSession(ctx, deviceID); err != nil {
		return bgp.Node{}, fmt.Errorf("reading the BGP sessions of device %s (node %s): %w", deviceID, n.Name, err)
	}
	if _, _, sessions, _ := mc.Take(); len(sessions) > 0 {
		res.BGPSessions = append(res.BGPSessions, plan.BGPSession{Node: n.Name, Device: deviceID})
	}
	neighbours, err := c.metal.DeviceBGPNeighbors(ctx, deviceID)
	if err != nil {
		return bgp.Node{}, fmt.Errorf("reading the BGP neighbours of device %s (node %s): %w", deviceID, n.Name, err)
	}
	device, err := c.metal.Device(ctx, deviceID)
	if err != nil {
		return bgp.Node{}, fmt.Errorf("reading device %s (node %s): %w", deviceID, n.Name, err)
	}
	return bgp.NodeFrom(n, deviceID, device, neighbours), nil
}

func annotationChange(n *v1.Node, patch map[string]*string) (plan.NodeAnnotationChange, bool) {
	if len(patch) == 0 {
		return plan.NodeAnnotationChange{}, false
	}
	ch := plan.NodeAnnotationChange{Node: n.Name, Set: map[string]string{}}
	for k, v := range patch {
		if v == nil {
			ch.Remove = append(ch.Remove, k)
		} else {
			ch.Set[k] = *v
		}
	}
	sort.Strings(ch.Remove)
	return ch, true
}

// planModule runs the module reconciler's Plan on the Services as the sync
// would leave them and the BGP nodes found above.
func (c *Cloud) planModule(ctx context.Context, ro *rest.Config, kube kubernetes.Interface, svcs []*v1.Service, nodes []bgp.Node, res *plan.Result) error {
	dyn, err := dynamic.NewForConfig(ro)
	if err != nil {
		return err
	}
	snap := &snapshotter{
		lb: c.cfg.LB, templates: bgp.TemplatesFrom(c.cfg),
		services: func(labels.Selector) ([]*v1.Service, error) { return svcs, nil },
		bgpNodes: func() []bgp.Node { return nodes },
		budget:   bgp.NewPrefixBudget(c.cfg.BGPMaxPrefixes, &plan.Recorder{}),
	}
	rec, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{Module: c.module, Dynamic: dyn, Kube: kube, Snapshot: snap.request})
	if err != nil {
		return err
	}
	changes, warnings, err := rec.Plan(ctx)
	if err != nil {
		return err
	}
	res.Objects = append(res.Objects, changes...)
	res.Warnings = append(res.Warnings, warnings...)
	return nil
}

// servicesAfter are the Services as a sync leaves them: those being
// released gone, and each other's status showing its address.
func servicesAfter(svcs []*v1.Service, addrs map[string]string) []*v1.Service {
	out := make([]*v1.Service, 0, len(svcs))
	for _, s := range svcs {
		if needsCleanup(s) {
			continue
		}
		if ip, ok := addrs[id(s)]; ok && !inStatus(s, ip) {
			s = s.DeepCopy()
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
		}
		out = append(out, s)
	}
	return out
}

func inStatus(s *v1.Service, ip string) bool {
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP == ip {
			return true
		}
	}
	return false
}

// eipPlanner runs eip.Manager over the capturing layers, one Service at a
// time, and turns what it captured into plan entries.
type eipPlanner struct {
	c      *Cloud
	mc     *plan.Metal
	all    []metalv1.IPReservation
	res    *plan.Result
	rec    *plan.Recorder
	kube   *plan.Kube
	placer policyPlacer
}

func (p *eipPlanner) run(ctx context.Context, ro *rest.Config, clusterID string, svcs []*v1.Service) (map[string]string, error) {
	kw, err := kubernetes.NewForConfig(p.kube.Config(ro))
	if err != nil {
		return nil, err
	}
	m := eip.NewManager(p.mc, kw, p.placer, p.rec, clusterID)
	m.SetServices(eip.Services{List: func() ([]*v1.Service, error) { return svcs, nil }, Synced: func() bool { return true }})
	addrs := map[string]string{}
	for _, s := range svcs {
		if controlplane.IsControlPlaneService(s.Namespace, s.Name) {
			continue // its own loop, never an Elastic IP of the Service kind
		}
		switch {
		case needsCleanup(s):
			why := "the Service is being deleted"
			if s.DeletionTimestamp == nil {
				why = "the Service is no longer of type LoadBalancer"
			}
			err := m.Release(ctx, s)
			p.collect(s, "", err, why)
		case wantsLoadBalancer(s):
			ip, err := m.Ensure(ctx, s)
			if ip != "" {
				addrs[id(s)] = ip
			}
			p.collect(s, ip, err, "")
			p.placement(ctx, s, ip)
		}
	}
	return addrs, nil
}

// collect turns what one Service's Ensure or Release captured into
// entries.
func (p *eipPlanner) collect(s *v1.Service, ip string, err error, releaseWhy string) {
	name := id(s)
	requests, deletes, _, _ := p.mc.Take()
	writes := p.kube.Take()
	reason := plan.Reasons(p.rec.Take(name))
	for _, r := range requests {
		p.add(plan.EIP{Action: plan.ActionReserve, Service: name, Location: r.Location.String(),
			Reason: fmt.Sprintf("no reservation carries the Service's tags; the placement policy (%s) decided %s", p.c.policies.Source(), r.Location)})
	}
	for _, d := range deletes {
		why := releaseWhy
		if why == "" {
			why = reason
		}
		p.add(plan.EIP{Action: plan.ActionRelease, Service: name, Address: p.address(d), Reason: why})
	}
	var pending *cloudapi.RetryError
	switch {
	case err != nil && len(requests) == 0 && errors.As(err, &pending):
		p.add(plan.EIP{Action: plan.ActionWait, Service: name, Reason: err.Error()})
	case err != nil && len(requests) == 0:
		p.add(plan.EIP{Action: plan.ActionRefuse, Service: name, Reason: err.Error()})
	}
	if ip != "" && !inStatus(s, ip) {
		if p.reserved(ip) {
			p.add(plan.EIP{Action: plan.ActionAdopt, Service: name, Address: ip, Reason: "a reservation carries the Service's tags (made by this CCM or by upstream's); the Service's status gets its address"})
		} else {
			p.add(plan.EIP{Action: plan.ActionAssign, Service: name, Address: ip, Reason: "spec.loadBalancerIP is the user's own address; the Service's status gets it"})
		}
	}
	for _, w := range writes {
		if w.Method == "PATCH" && strings.Contains(w.Body, `"loadBalancerIP"`) {
			p.add(plan.EIP{Action: plan.ActionSetLoadBalancerIP, Service: name, Address: ip, Reason: "the CCM writes the Elastic IP into spec.loadBalancerIP, where load balancers written for upstream read it"})
			continue
		}
		p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("the Elastic IP code for Service %s would also %s %s", name, w.Method, w.Path))
	}
}

func (p *eipPlanner) add(e plan.EIP) { p.res.EIPs = append(p.res.EIPs, e) }

// placement compares an existing reservation of the Service's with where
// the placement policy would put it now.
func (p *eipPlanner) placement(ctx context.Context, s *v1.Service, ip string) {
	r := p.reservationAt(ip)
	if r == nil || !slices.Contains(r.Tags, eip.UsageTag) {
		return // none yet, or the user's own address
	}
	loc, err := p.placer.Place(ctx, s)
	if err != nil {
		return // a refusal shows among the EIPs when it matters (new Services)
	}
	if from := locationOf(r, loc); from != strings.ToLower(loc.String()) {
		p.res.Placement = append(p.res.Placement, plan.Placement{Service: id(s), Address: ip, From: from, To: loc.String()})
	}
}

// locationOf says where r is, in the terms of want (metro or facility).
func locationOf(r *metalv1.IPReservation, want location.Location) string {
	if want.Facility != "" {
		return location.Location{Facility: strings.ToLower(facilityCode(r))}.String()
	}
	m := r.GetMetro()
	return location.Location{Metro: strings.ToLower(m.GetCode())}.String()
}

func (p *eipPlanner) reservationAt(ip string) *metalv1.IPReservation {
	if ip == "" {
		return nil
	}
	for i := range p.all {
		if p.all[i].GetAddress() == ip {
			return &p.all[i]
		}
	}
	return nil
}

func (p *eipPlanner) reserved(ip string) bool { return p.reservationAt(ip) != nil }

func (p *eipPlanner) address(id string) string {
	for _, r := range p.all {
		if r.GetId() == id {
			return r.GetAddress()
		}
	}
	return id
}

func facilityCode(r *metalv1.IPReservation) string {
	f := r.GetFacility()
	return f.GetCode()
}
