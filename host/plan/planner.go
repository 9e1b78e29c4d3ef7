package plan

import (
	"context"
	"fmt"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// Planner runs the CCM's own code once, the way a sync would: the Elastic
// IP lifecycle (eip.Manager), BGP project set-up, selection and
// annotations, and the load-balancer module's reconciler, over the
// capturing layers of this package. host/provider fills it in from the
// provider it built for the plan (Cloud.Plan), so the plan runs the parts
// the CCM runs.
type Planner struct {
	// Metal is the read-only Equinix Metal client (metal.Options.ReadOnly);
	// the planner reads through it and captures the writes (Metal).
	Metal *metal.Client
	// Config is the configuration the provider was built with.
	Config *config.Config
	// UserAgent identifies the plan to the API server.
	UserAgent string
	// LB is the provider's load balancing; nil when the loadbalancer
	// setting turns it off (then there are no Elastic IPs, BGP or module).
	LB *LoadBalancing
}

// LoadBalancing is what the plan needs of the provider's load balancing.
type LoadBalancing struct {
	// Policies names the loaded policies in the reasons of the plan.
	Policies policySource
	// Placer is the placement policy over the given nodes, as the running
	// CCM asks it over the Node informer's.
	Placer func(nodes corelisters.NodeLister) eip.Placer
	// Selector is the BGP selection policy.
	Selector bgp.Selector
	// Module is the loaded load-balancer module; nil without one.
	Module *wasmhost.Module
	// Snapshot is the module's input made the way the running CCM makes it,
	// from the given Services and BGP nodes.
	Snapshot func(svcs []*v1.Service, nodes []lbsnapshot.Node) lbmodule.SnapshotFunc
}

// policySource names where the policies were loaded from (policy.Engine).
type policySource interface {
	Source() string
}

// lbCleanupFinalizer is the service controller's finalizer: a Service that
// carries it has had a load balancer, which the controller releases.
const lbCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// Run reports what a sync would change, against the cluster at restConfig
// and Equinix, both read-only.
func (p *Planner) Run(ctx context.Context, restConfig *rest.Config) (*Result, error) {
	ro := ReadOnlyKube(restConfig, p.UserAgent)
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
	all, err := p.Metal.Reservations(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the project's IP reservations: %w", err)
	}
	res := newResult(clusterID, p.Config.OrphanEIPs, eip.FindOrphans(all, clusterID, svcs))
	if p.LB == nil {
		return res, nil // load balancing is off: no EIPs, BGP or module
	}
	mc := newMetal(p.Metal)
	// A load balancer that cannot announce IPv6 gets no IPv6 Elastic IP,
	// so its nodes get no IPv6 session either.
	noIPv6 := p.Config.LB.IPv6Unsupported()
	bgpNodes, err := p.planBGP(ctx, mc, nodes, noIPv6 == "" && eip.NeedsIPv6(svcs), res)
	if err != nil {
		return nil, err
	}
	e := &eipPlanner{policies: p.LB.Policies, mc: mc, all: all, res: res, rec: &Recorder{}, kube: &kubeCapture{},
		placer: p.LB.Placer(nodeLister(nodes)), noIPv6: noIPv6}
	addrs, err := e.run(ctx, ro, clusterID, svcs)
	if err != nil {
		return nil, err
	}
	if p.LB.Module != nil {
		if err := p.planModule(ctx, ro, kube, servicesAfter(svcs, addrs), bgpNodes, res); err != nil {
			return nil, fmt.Errorf("load-balancer module: %w", err)
		}
	}
	later(res)
	return res, nil
}

// newResult is a result with nothing to change yet: every list empty
// rather than nil, so the JSON shows [] for each.
func newResult(clusterID, orphanMode string, orphans []eip.Orphan) *Result {
	if orphans == nil {
		orphans = []eip.Orphan{}
	}
	return &Result{ClusterUID: clusterID, OrphanMode: orphanMode, EIPs: []eipChange{}, Placement: []placement{},
		Orphans: orphans, BGPSessions: []bgpSession{},
		Annotations: []nodeAnnotationChange{}, Objects: []lbmodule.Change{}, Warnings: []string{}, Later: []string{}}
}

// later notes what depends on this sync's own writes.
func later(res *Result) {
	if n := countAction(res.EIPs, ActionReserve); n > 0 {
		res.Later = append(res.Later, fmt.Sprintf("the addresses of the %d Elastic IPs to reserve, and the load-balancer objects that announce them", n))
	}
	if n := len(res.BGPSessions); n > 0 {
		res.Later = append(res.Later, fmt.Sprintf("the BGP peers of the %d nodes whose session is to be created (Equinix reports a device's peers once it has a session), their peer annotations and the load-balancer objects that peer with them", n))
	}
}

func countAction(es []eipChange, action string) int {
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

// needsCleanup is the service controller's rule for the Services it hands
// to EnsureLoadBalancerDeleted.
func needsCleanup(s *v1.Service) bool {
	return slices.Contains(s.Finalizers, lbCleanupFinalizer) && (s.DeletionTimestamp != nil || !lbsnapshot.WantsLoadBalancer(s))
}
