// Package lbhosts is the node set k8s.io/cloud-provider's service
// controller sees: one representative node instead of all of them.
//
// The service controller keeps, per Service, the list of nodes it last
// passed to the load balancer, and on every node change compares the old
// and new lists of every Service: memory and work of Services × nodes. At
// 10,000 Services on 1,000 nodes that is 10 million node pointers held and,
// while nodes join, gigabytes of garbage per second, which starved the rest
// of the CCM (module calls past their deadline, placement-policy timeouts).
//
// This CCM's load balancer does not use that list: an Elastic IP is per
// Service, and the BGP nodes are handled for all Services at once by
// host/bgp, which regenerates the load-balancer config itself when nodes
// change. What the service controller does with the list that matters is
// warn (UnAvailableLoadBalancer) when no node can serve; one eligible node
// keeps that exact. So the controller's node lister lists, of the nodes it
// would keep, only the first by name.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package lbhosts

import (
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/utils/clock"
)

// maxAge bounds how long the representative is reused without a node
// event: it is recomputed after any node change, and at least this often.
const maxAge = time.Second

// Informer is the Node informer to give the service controller in place
// of the shared one: it wraps the shared Node informer, whose event
// handlers and sync state it keeps, and its Lister lists one
// representative node. NewInformer makes one.
type Informer struct {
	coreinformers.NodeInformer
	lister *representative
}

// NewInformer wraps inf. The representative is computed once per node
// change (or maxAge), not once per Service: listing 1,000 nodes for each
// of 10,000 Services would cost what this package avoids.
func NewInformer(inf coreinformers.NodeInformer) *Informer {
	r := newRepresentative(inf.Lister(), clock.RealClock{})
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.invalidate() },
		UpdateFunc: func(any, any) { r.invalidate() },
		DeleteFunc: func(any) { r.invalidate() },
	})
	return &Informer{NodeInformer: inf, lister: r}
}

// Lister lists, of the nodes the service controller would consider for a
// load balancer, the first by name.
func (i *Informer) Lister() corelisters.NodeLister { return i.lister }

var _ coreinformers.NodeInformer = (*Informer)(nil)

type representative struct {
	corelisters.NodeLister
	clock clock.PassiveClock

	mu    sync.Mutex
	valid bool
	at    time.Time
	first []*v1.Node
}

func newRepresentative(l corelisters.NodeLister, c clock.PassiveClock) *representative {
	return &representative{NodeLister: l, clock: c}
}

func (r *representative) invalidate() {
	r.mu.Lock()
	r.valid = false
	r.mu.Unlock()
}

func (r *representative) List(selector labels.Selector) ([]*v1.Node, error) {
	if !selector.Empty() {
		nodes, err := r.NodeLister.List(selector)
		if err != nil {
			return nil, err
		}
		return first(nodes), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.clock.Now(); !r.valid || now.Sub(r.at) >= maxAge {
		nodes, err := r.NodeLister.List(selector)
		if err != nil {
			return nil, err
		}
		r.first, r.valid, r.at = first(nodes), true, now
	}
	// A slice of its own: the caller keeps it.
	return append([]*v1.Node(nil), r.first...), nil
}

// first returns the eligible node with the smallest name (none if no node
// is eligible). Eligible is what the service controller's stable node set
// requires: not being deleted, not labelled
// node.kubernetes.io/exclude-from-external-load-balancers (unless the value
// is false), not tainted for deletion by the cluster autoscaler.
func first(nodes []*v1.Node) []*v1.Node {
	var first *v1.Node
	for _, n := range nodes {
		if eligible(n) && (first == nil || n.Name < first.Name) {
			first = n
		}
	}
	if first == nil {
		return nil
	}
	return []*v1.Node{first}
}

func eligible(n *v1.Node) bool {
	if !n.DeletionTimestamp.IsZero() {
		return false
	}
	if v, ok := n.Labels[v1.LabelNodeExcludeBalancers]; ok {
		if excluded, err := strconv.ParseBool(v); err != nil || excluded {
			return false
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == servicecontroller.ToBeDeletedTaint {
			return false
		}
	}
	return true
}
