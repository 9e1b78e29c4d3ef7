package controlplane

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// health is the probe history of one target, reduced to what the decision
// needs: how many probes in a row have passed or failed. Hysteresis lives
// in these counters: one slow answer resets Successes but leaves Failures
// at 1, far from the threshold.
type health struct {
	// Probed is false until the first probe of this target has finished.
	Probed bool
	// Successes and Failures are the lengths of the current run; at most one
	// of them is non-zero.
	Successes int
	Failures  int
}

// Record returns h after one more probe result.
func (h health) Record(ok bool) health {
	h.Probed = true
	if ok {
		h.Successes++
		h.Failures = 0
	} else {
		h.Failures++
		h.Successes = 0
	}
	return h
}

// Healthy reports whether the last probe passed.
func (h health) Healthy() bool { return h.Probed && h.Failures == 0 && h.Successes > 0 }

// assignment is one assignment of the control-plane EIP to a device.
type assignment struct {
	// ID is the assignment's UUID: DELETE /ips/{ID} unassigns it.
	ID string
	// DeviceID is the device the EIP is routed to.
	DeviceID string
}

// nodeState is what the decision knows about one control-plane node.
type nodeState struct {
	Name string
	// DeviceID comes from spec.providerID; "" while the node has none, and
	// such a node can never receive the EIP.
	DeviceID string
	// Uninitialized is true while the node has no spec.providerID at all
	// (the cloud node controller has not initialised it yet).
	Uninitialized bool
	Unschedulable bool
	// Metro is the code of the metro the node's device is in ("" when
	// unknown). Equinix assigns an Elastic IP only to a device in the
	// EIP's own metro (422 otherwise), so only such nodes are candidates.
	Metro string
	// Deleting is true once the node has a deletionTimestamp.
	Deleting bool
	// Health is the history of probes of the node's own addresses.
	Health health
}

// policy holds the thresholds of the decision.
type policy struct {
	// Failures is how many consecutive failed probes of the holder move the
	// EIP (healthCheckFailures).
	Failures int
	// Rise is how many consecutive passed probes a node needs before it may
	// receive the EIP from a holder that still has it. A node that answered
	// once after an outage is not trusted yet: this is what stops the EIP
	// from bouncing between two flapping nodes.
	Rise int
	// Grace is how long after the holder changed its failed probes do not
	// count. Routing an EIP to a new device takes a moment; without a grace
	// the probes of the EIP during that moment would move it again.
	Grace time.Duration
}

// input is everything the decision looks at, captured at one instant.
type input struct {
	Now time.Time
	// Assignments are the EIP's current assignments, as Equinix reports them.
	Assignments []assignment
	// HolderHealth is the probe history of the holder: of the EIP itself, or
	// with eipHealthCheckUseHostIP of the holder node's own address. It is
	// used only when there is exactly one assignment.
	HolderHealth health
	// HolderSince is when the current holder was first seen.
	HolderSince time.Time
	// EIPMetro is the metro of the EIP's reservation ("" for an EIP that
	// is bound to no metro, which may go to any node).
	EIPMetro string
	// Nodes are the cluster's control-plane nodes, in any order.
	Nodes  []nodeState
	Policy policy
}

// actionKind says what the manager should do.
type actionKind int

const (
	// keep: the EIP stays where it is.
	keep actionKind = iota
	// move: unassign Unassign, then assign to Target.
	move
	// assign: the EIP has no assignment (a move was interrupted, or someone
	// unassigned it); assign it to Target.
	assign
	// trim: the EIP has more than one assignment; remove Unassign and keep
	// the rest.
	trim
	// stuck: the holder should be replaced but no control-plane node is
	// eligible; the EIP stays and Reason says why.
	stuck
)

func (k actionKind) String() string {
	switch k {
	case keep:
		return "keep"
	case move:
		return "move"
	case assign:
		return "assign"
	case trim:
		return "trim"
	case stuck:
		return "stuck"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// decision is the outcome of decide.
type decision struct {
	Kind actionKind
	// Unassign lists the assignments to delete, before Target is assigned.
	Unassign []assignment
	// Target is the node to assign the EIP to (move and assign).
	Target nodeState
	// Reason is a short human sentence for logs and Events.
	Reason string
	// Cause is Reason as one of the Cause* constants, for metrics.
	Cause string
}

// Causes of a change (Decision.Cause).
const (
	causeUnhealthy  = "unhealthy"
	causeCordoned   = "cordoned"
	causeDeleting   = "deleting"
	causeNotANode   = "not-a-node"
	causeUnassigned = "unassigned"
	causeDuplicate  = "duplicate"
)

// decide is the whole control-plane EIP policy as a pure function: the same
// input always gives the same decision, so every case is a table test and
// the I/O loop around it only gathers facts and carries the decision out.
//
// The EIP is moved only to a node that answers, and never left unassigned
// when such a node exists. Candidates are taken in node-name order so that
// two managers (or two rounds) looking at the same facts pick the same node.
func decide(in input) decision {
	nodes := slices.Clone(in.Nodes)
	slices.SortFunc(nodes, func(a, b nodeState) int { return strings.Compare(a.Name, b.Name) })
	byDevice := make(map[string]nodeState, len(nodes))
	for _, n := range nodes {
		if n.DeviceID != "" {
			byDevice[n.DeviceID] = n
		}
	}
	pol := in.Policy
	if pol.Failures < 1 {
		pol.Failures = 1
	}
	if pol.Rise < 1 {
		pol.Rise = 1
	}

	switch len(in.Assignments) {
	case 0:
		// Anything that answers is better than no endpoint at all, so the
		// rise requirement is waived here.
		if t, ok := pick(nodes, "", 1, in.EIPMetro); ok {
			return decision{Kind: assign, Target: t, Reason: "the EIP has no assignment", Cause: causeUnassigned}
		}
		return decision{Kind: stuck, Reason: "the EIP has no assignment and " + noneEligible(nodes, "", in.EIPMetro), Cause: causeUnassigned}
	case 1:
		// handled below
	default:
		return trimAssignments(in.Assignments, byDevice)
	}

	holder := in.Assignments[0]
	hn, known := byDevice[holder.DeviceID]
	var why, cause string
	switch {
	case !known && uninitialized(nodes) != "":
		// At start-up the cloud node controller has not yet given every
		// node its provider ID: the holder may well be one of those, and
		// healthy. Moving the EIP away from it would be a needless outage.
		return decision{Kind: keep, Reason: fmt.Sprintf("holder device %s may be node %s, which has no provider ID yet", holder.DeviceID, uninitialized(nodes))}
	case !known:
		why = fmt.Sprintf("holder device %s is not a control-plane node of this cluster (node deleted?)", holder.DeviceID)
		cause = causeNotANode
	case hn.Deleting:
		why = fmt.Sprintf("holder node %s is being deleted", hn.Name)
		cause = causeDeleting
	case hn.Unschedulable:
		why = fmt.Sprintf("holder node %s is cordoned", hn.Name)
		cause = causeCordoned
	case in.HolderHealth.Failures >= pol.Failures && in.Now.Sub(in.HolderSince) >= pol.Grace:
		why = fmt.Sprintf("holder node %s failed %d health checks in a row", hn.Name, in.HolderHealth.Failures)
		cause = causeUnhealthy
	default:
		return decision{Kind: keep, Reason: "holder is healthy"}
	}
	unassign := []assignment{holder}
	if t, ok := pick(nodes, holder.DeviceID, pol.Rise, in.EIPMetro); ok {
		return decision{Kind: move, Unassign: unassign, Target: t, Reason: why, Cause: cause}
	}
	return decision{Kind: stuck, Reason: why + "; " + noneEligible(nodes, holder.DeviceID, in.EIPMetro) + ", so the EIP stays", Cause: cause}
}

// pick returns the first node, in name order, that may receive the EIP:
// not the current holder, with a device in the EIP's metro, not being
// deleted, and with at least rise passed probes in a row. Schedulable nodes
// come first; a cordoned node is used only when nothing else answers,
// because a cordoned apiserver still serves. A node in another metro is
// never picked: Equinix would refuse the assignment, and a move unassigns
// the holder first, so picking it would leave the EIP on nobody.
func pick(sorted []nodeState, holderDevice string, rise int, metro string) (nodeState, bool) {
	for _, cordonedToo := range []bool{false, true} {
		for _, n := range sorted {
			if n.DeviceID == "" || n.DeviceID == holderDevice || n.Deleting || !inMetro(n, metro) {
				continue
			}
			if n.Unschedulable && !cordonedToo {
				continue
			}
			if n.Health.Healthy() && n.Health.Successes >= rise {
				return n, true
			}
		}
	}
	return nodeState{}, false
}

// trimAssignments keeps one of several assignments: the first, in node-name order,
// whose node answers; else the first on a known node; else the first.
func trimAssignments(as []assignment, byDevice map[string]nodeState) decision {
	sorted := slices.Clone(as)
	rank := func(a assignment) (int, string) {
		n, ok := byDevice[a.DeviceID]
		switch {
		case ok && !n.Deleting && !n.Unschedulable && n.Health.Healthy():
			return 0, n.Name
		case ok && !n.Deleting && n.Health.Healthy():
			return 1, n.Name
		case ok:
			return 2, n.Name
		}
		return 3, a.ID
	}
	slices.SortFunc(sorted, func(a, b assignment) int {
		ra, na := rank(a)
		rb, nb := rank(b)
		if ra != rb {
			return ra - rb
		}
		return strings.Compare(na, nb)
	})
	return decision{
		Kind:     trim,
		Unassign: sorted[1:],
		Reason:   fmt.Sprintf("the EIP has %d assignments; keeping the one on device %s", len(as), sorted[0].DeviceID),
		Cause:    causeDuplicate,
	}
}

// uninitialized names the first control-plane node (not being deleted)
// without a provider ID, "" when there is none. A node with a provider ID
// of another cloud is not one: it will never be given an Equinix device.
func uninitialized(sorted []nodeState) string {
	for _, n := range sorted {
		if n.Uninitialized && !n.Deleting {
			return n.Name
		}
	}
	return ""
}

// inMetro reports whether n may hold an EIP of metro ("" = any metro).
func inMetro(n nodeState, metro string) bool {
	return metro == "" || strings.EqualFold(n.Metro, metro)
}

// noneEligible describes why no node was eligible, for the log and the
// Event. When healthy nodes exist only in other metros it names them, so
// the reader sees at once that the cluster needs a control-plane node in
// the EIP's metro (or an EIP in theirs).
func noneEligible(nodes []nodeState, holderDevice, metro string) string {
	if len(nodes) == 0 {
		return "there are no control-plane nodes"
	}
	if metro == "" {
		return fmt.Sprintf("none of the %d control-plane nodes is eligible (healthy, with a provider ID, not being deleted)", len(nodes))
	}
	var here int
	var elsewhere []string
	for _, n := range nodes {
		if inMetro(n, metro) {
			here++
			continue
		}
		if n.DeviceID != "" && n.DeviceID != holderDevice && !n.Deleting && n.Health.Healthy() {
			m := n.Metro
			if m == "" {
				m = "an unknown metro"
			}
			elsewhere = append(elsewhere, n.Name+" in "+m)
		}
	}
	msg := fmt.Sprintf("none of the %d control-plane nodes in metro %s is eligible (healthy, with a provider ID, not being deleted)", here, metro)
	if len(elsewhere) > 0 {
		msg += fmt.Sprintf("; healthy nodes in other metros (%s) cannot take it, since Equinix assigns an Elastic IP only in its own metro: add a control-plane node in %s", strings.Join(elsewhere, ", "), metro)
	}
	return msg
}
