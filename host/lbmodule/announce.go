package lbmodule

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Event reasons of the announcement check.
const (
	// ReasonNoAnnouncingNode: a Local Service has an address and ready
	// endpoints, none of them on a BGP node; no router has a path to it.
	ReasonNoAnnouncingNode = "NoAnnouncingNode"
	// ReasonAnnouncingNodeRestored: after NoAnnouncingNode, a BGP node has
	// one of the Service's ready endpoints again.
	ReasonAnnouncingNodeRestored = "AnnouncingNodeRestored"
)

// maxNodesNamed bounds the node names an Event lists: a Service may have
// endpoints on hundreds of nodes.
const maxNodesNamed = 3

// AnnouncementsConfig wires the announcement check (NewAnnouncements).
type AnnouncementsConfig struct {
	// Service reads one Service (the informer's lister); an error is
	// taken for a Service that is gone.
	Service func(namespace, name string) (*corev1.Service, error)
	// ReadyNodes are the nodes of one Service's ready endpoints, read from
	// an index of its own EndpointSlices (not a scan of the cluster's);
	// nil when none are known.
	ReadyNodes func(namespace, name string) []string
	// Recorder receives the Events; nil records none.
	Recorder eventRecorder
	Logger   *klog.Logger
}

// Announcements says on a Service when its address becomes a black hole:
// externalTrafficPolicy Local, an address in its status, ready endpoints,
// and none of them on a node the BGP selection keeps (lbsnapshot.Announce).
// Such an address is announced by no node, so Equinix's routers have no
// path for it, and nothing else in the cluster says so.
//
// One Event per change of state, not one per sync: a Warning when a
// Service enters the state, a Normal one when a BGP node has one of its
// ready endpoints again. The state is memory only; after a restart a
// Service still in it is reported once more.
//
// Its cost: at each sync of the module (Observe), a lister read and the
// Service's own endpoints for each Local Service of the snapshot; at each
// change of an EndpointSlice (EndpointsChanged), the one Service's. Never a
// scan of the cluster's endpoints.
//
// NewAnnouncements makes one; the provider hands it to the Reconciler
// (ReconcilerConfig.Announcements) and calls EndpointsChanged from its
// EndpointSlice informer.
type Announcements struct {
	cfg AnnouncementsConfig
	log klog.Logger

	mu sync.Mutex
	// bgp are the BGP nodes of the last snapshot; nil before the first,
	// when nothing is decided.
	bgp map[string]bool
	// nodeMetro is each BGP node's metro (its sdk.MetroLabel), and
	// serviceMetro the metro where a Service's Elastic IPs are reserved,
	// by UID (when all its located addresses share one): Equinix routes
	// an Elastic IP in its metro alone, so only BGP nodes there announce
	// it, whatever the module writes.
	nodeMetro    map[string]string
	serviceMetro map[types.UID]string
	// dark are the Services reported NoAnnouncingNode, by UID.
	dark map[types.UID]bool
}

// NewAnnouncements returns the check; the Reconciler runs it after each
// snapshot (ReconcilerConfig.Announcements), the EndpointSlice informer
// calls EndpointsChanged.
func NewAnnouncements(cfg AnnouncementsConfig) *Announcements {
	a := &Announcements{cfg: cfg, dark: map[types.UID]bool{}}
	if cfg.Logger != nil {
		a.log = *cfg.Logger
	} else {
		a.log = klog.Background()
	}
	return a
}

// Observe checks every Service of a snapshot against its BGP nodes, and
// forgets the Services that left it.
func (a *Announcements) Observe(req sdk.GenerateRequest) {
	bgp := make(map[string]bool, len(req.Nodes))
	nodeMetro := make(map[string]string, len(req.Nodes))
	for _, n := range req.Nodes {
		bgp[n.Name] = true
		if m := n.Labels[sdk.MetroLabel]; m != "" {
			nodeMetro[n.Name] = m
		}
	}
	serviceMetro := map[types.UID]string{}
	for _, s := range req.Services {
		if m := oneMetro(s.Locations); m != "" {
			serviceMetro[types.UID(s.UID)] = m
		}
	}
	seen := make(map[types.UID]bool, len(req.Services))
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bgp, a.nodeMetro, a.serviceMetro = bgp, nodeMetro, serviceMetro
	for _, s := range req.Services {
		seen[types.UID(s.UID)] = true
		a.checkLocked(s.Namespace, s.Name)
	}
	for uid := range a.dark {
		if !seen[uid] {
			delete(a.dark, uid) // deleted, or no longer load-balanced: nothing to announce
		}
	}
}

// EndpointsChanged checks one Service after a change of its EndpointSlices
// (a pod became ready or went, possibly on another node). It decides
// nothing before the first snapshot.
func (a *Announcements) EndpointsChanged(namespace, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bgp == nil {
		return
	}
	a.checkLocked(namespace, name)
}

func (a *Announcements) checkLocked(namespace, name string) {
	svc, err := a.cfg.Service(namespace, name)
	if err != nil || svc == nil {
		return
	}
	var ready []string
	if a.cfg.ReadyNodes != nil && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		ready = a.cfg.ReadyNodes(namespace, name)
	}
	an := lbsnapshot.Announce(svc, ready, a.bgp)
	metro := a.serviceMetro[svc.UID]
	if metro != "" {
		// A BGP node of another metro would announce it to routers that
		// refuse it.
		an.Announcers = slices.DeleteFunc(an.Announcers, func(n string) bool { return a.nodeMetro[n] != metro })
	}
	was := a.dark[svc.UID]
	switch {
	case an.Unannounced() && !was && metro != "":
		a.dark[svc.UID] = true
		a.log.Info("A Local Service's ready endpoints are all on nodes that are not BGP nodes of its Elastic IP's metro: no router has a path to its address", "service", klog.KObj(svc), "addresses", addresses(svc), "metro", metro, "endpointNodes", an.Ready)
		a.event(svc, corev1.EventTypeWarning, ReasonNoAnnouncingNode,
			"No BGP node announces %s: externalTrafficPolicy is Local, the Elastic IP is routed in metro %s only, and the Service's ready endpoints are only on nodes that are not BGP nodes there (%s), so no router has a path to it; run its pods on BGP nodes in %s, or set externalTrafficPolicy: Cluster",
			strings.Join(addresses(svc), ", "), metro, names(an.Ready), metro)
	case an.Unannounced() && !was:
		a.dark[svc.UID] = true
		a.log.Info("A Local Service's ready endpoints are all on nodes without BGP: no router has a path to its address", "service", klog.KObj(svc), "addresses", addresses(svc), "endpointNodes", an.Ready)
		a.event(svc, corev1.EventTypeWarning, ReasonNoAnnouncingNode,
			"No BGP node announces %s: externalTrafficPolicy is Local and the Service's ready endpoints are only on nodes without BGP (%s), so no router has a path to it; run its pods on nodes the BGP selection keeps (the selection policy, bgpNodeSelector), or set externalTrafficPolicy: Cluster",
			strings.Join(addresses(svc), ", "), names(an.Ready))
	case was && !an.Unannounced():
		delete(a.dark, svc.UID)
		if len(an.Announcers) == 0 {
			// No longer Local, no ready endpoint, no address: not a
			// recovery to announce, only the end of this report.
			a.log.V(2).Info("A Service reported NoAnnouncingNode no longer applies", "service", klog.KObj(svc))
			return
		}
		a.log.Info("A Local Service's address is announced again", "service", klog.KObj(svc), "bgpNodes", an.Announcers)
		a.event(svc, corev1.EventTypeNormal, ReasonAnnouncingNodeRestored,
			"BGP nodes with ready endpoints of the Service announce %s again: %s", strings.Join(addresses(svc), ", "), names(an.Announcers))
	}
}

func (a *Announcements) event(svc *corev1.Service, typ, reason, format string, args ...any) {
	if a.cfg.Recorder != nil {
		a.cfg.Recorder.Eventf(svc, typ, reason, format, args...)
	}
}

// addresses are the Service's addresses as the module sees them.
func addresses(svc *corev1.Service) []string {
	s, _ := lbsnapshot.ServiceFromK8s(svc)
	return s.IPs
}

// oneMetro is the metro of a Service's located addresses when they share
// one, "" otherwise (none located, or several metros: no single place to
// check).
func oneMetro(ls []sdk.AddressLocation) string {
	m := ""
	for _, l := range ls {
		switch {
		case l.Metro == "":
			return ""
		case m == "":
			m = l.Metro
		case m != l.Metro:
			return ""
		}
	}
	return m
}

// names lists at most maxNodesNamed nodes, and how many more.
func names(nodes []string) string {
	if len(nodes) <= maxNodesNamed {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:maxNodesNamed], ", "), len(nodes)-maxNodesNamed)
}
