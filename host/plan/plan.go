// Package plan is what `cloud-provider-equinix-metal plan` reports: the
// changes a sync of the CCM would make, found by running the CCM's own
// decision code with every write captured instead of sent. This package
// holds the planner that runs that code (Planner, which host/provider
// fills in with the parts it built: Cloud.Plan), the capturing layers it
// runs over, the result, its rendering for people and machines, and the
// exit code. The planner reads through the read-only clients it is given
// and writes nothing; Cleanup, for a cluster that is gone, is the one part
// that releases.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package plan

import (
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
)

// Exit codes of the plan command, so that it can gate a pipeline.
const (
	ExitNoChanges = 0
	ExitError     = 1
	ExitChanges   = 2
)

// Result is everything a sync would change, and what it would not but a
// person should see (orphans in report mode, refused Services).
type Result struct {
	ClusterUID string `json:"clusterUID"`
	// OrphanMode is the orphanEIPs setting the plan ran with.
	OrphanMode string `json:"orphanMode"`

	EIPs []eipChange `json:"eips"`
	// Placement lists the Services whose existing Elastic IP is not where
	// the placement policy would put it now.
	Placement   []placement            `json:"placement"`
	Orphans     []eip.Orphan           `json:"orphans"`
	ProjectBGP  string                 `json:"projectBGP,omitempty"`
	BGPSessions []bgpSession           `json:"bgpSessions"`
	Annotations []nodeAnnotationChange `json:"nodeAnnotations"`
	Objects     []lbmodule.Change      `json:"objects"`
	Warnings    []string               `json:"warnings"`
	// Later lists what the plan cannot show yet because it depends on a
	// write of this sync (a new Elastic IP's address, a new session's
	// peers): run plan again after the sync.
	Later []string `json:"later"`
}

// EIP actions.
const (
	ActionReserve = "reserve"
	ActionAdopt   = "adopt"
	ActionRelease = "release"
	// ActionSetLoadBalancerIP is the CCM's patch of spec.loadBalancerIP.
	ActionSetLoadBalancerIP = "set-loadBalancerIP"
	// actionAssign is a bring-your-own address written to the status.
	actionAssign = "assign"
	// ActionWait is a reservation still pending approval: nothing changes.
	ActionWait = "wait"
	// actionRefuse is a Service the sync would refuse (placement denied,
	// an invalid spec.loadBalancerIP, …): nothing changes but an Event.
	actionRefuse = "refuse"
)

// eipChange is one Elastic IP step for one Service.
type eipChange struct {
	Action   string `json:"action"`
	Service  string `json:"service"`
	Address  string `json:"address,omitempty"`
	Location string `json:"location,omitempty"`
	// Family is the address family of a reservation to make, "IPv4" or
	// "IPv6" (a dual-stack Service has one of each).
	Family string `json:"family,omitempty"`
	// Reason says why: the placement policy's decision, or the Events the
	// sync would record.
	Reason string `json:"reason"`
}

// placement is a Service whose Elastic IP is in From while the placement
// policy now says To. The CCM does not move an existing Elastic IP (that
// would change the Service's address): the reservation stays until the
// Service is recreated, which then lands in To.
type placement struct {
	Service string `json:"service"`
	Address string `json:"address"`
	From    string `json:"from"`
	To      string `json:"to"`
}

// bgpSession is a device that would get its IPv4 BGP session.
type bgpSession struct {
	Node   string `json:"node"`
	Device string `json:"device"`
	// Family is "ipv4" or "ipv6": a node's IPv6 session is created once a
	// Service has an IPv6 Elastic IP.
	Family string `json:"family"`
}

// nodeAnnotationChange is the core's BGP annotations of one node that a
// sync would set or remove (the module's own are in Objects, action
// annotate).
type nodeAnnotationChange struct {
	Node   string            `json:"node"`
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// Changes says whether a sync would change anything. Refused and waiting
// Services change nothing; orphans only when orphanEIPs is release (and
// then once their grace period is over, which the plan cannot know: it
// keeps no memory of when they were first seen). Placement differences
// count, so that a pipeline notices what a new policy would do to the
// next Services.
func (r *Result) Changes() bool {
	for _, e := range r.EIPs {
		if e.Action != ActionWait && e.Action != actionRefuse {
			return true
		}
	}
	return len(r.Placement) > 0 || (r.OrphanMode == "release" && len(r.Orphans) > 0) ||
		r.ProjectBGP != "" || len(r.BGPSessions) > 0 || len(r.Annotations) > 0 || len(r.Objects) > 0
}

// ExitCode is ExitChanges or ExitNoChanges.
func (r *Result) ExitCode() int {
	if r.Changes() {
		return ExitChanges
	}
	return ExitNoChanges
}
