package controlplane

import (
	"net"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/instances"
)

// Control-plane node role labels: the current one and the one clusters
// made before Kubernetes 1.20 still carry.
const (
	labelControlPlane = "node-role.kubernetes.io/control-plane"
	labelMaster       = "node-role.kubernetes.io/master"
)

// isControlPlaneNode reports whether a node carries either role label
// (with any value, as kubeadm sets it to "").
func isControlPlaneNode(n *v1.Node) bool {
	if n == nil {
		return false
	}
	_, cp := n.Labels[labelControlPlane]
	_, master := n.Labels[labelMaster]
	return cp || master
}

// stateOf turns a Node into what Decide needs. A provider ID that is
// not an Equinix Metal one leaves DeviceID empty: such a node can be probed
// but never given the EIP.
func stateOf(n *v1.Node, h health) nodeState {
	dev := ""
	if n.Spec.ProviderID != "" {
		if id, err := instances.DeviceID(n.Spec.ProviderID); err == nil {
			dev = strings.ToLower(id) // UUIDs; the API writes them in lower case
		}
	}
	return nodeState{
		Name:          n.Name,
		DeviceID:      dev,
		Uninitialized: n.Spec.ProviderID == "",
		Unschedulable: n.Spec.Unschedulable,
		Deleting:      n.DeletionTimestamp != nil,
		Health:        h,
	}
}

// probeAddresses are the node's own IP addresses to probe its apiserver
// on: internal and external, in the node's order, without duplicates and
// without the EIP (which answers for whichever node holds it, not for this
// one). Host names are skipped: resolving them would make the probe depend
// on DNS.
func probeAddresses(n *v1.Node, eip string) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP && a.Type != v1.NodeExternalIP {
			continue
		}
		ip := net.ParseIP(a.Address)
		if ip == nil || a.Address == eip || slices.Contains(out, a.Address) {
			continue
		}
		out = append(out, a.Address)
	}
	return out
}

// relevantNodeChange reports whether an update of a node can change a
// decision, so that a cordon or a deletion is acted on at once instead of at
// the next probe round. Status heartbeats and condition changes are not.
func relevantNodeChange(old, cur *v1.Node) bool {
	if isControlPlaneNode(old) != isControlPlaneNode(cur) {
		return true
	}
	if !isControlPlaneNode(cur) {
		return false
	}
	return old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		old.Spec.ProviderID != cur.Spec.ProviderID ||
		!slices.Equal(probeAddresses(old, ""), probeAddresses(cur, ""))
}

// deviceIDFromHref extracts the device UUID from an assignment's
// assigned_to.href ("/metal/v1/devices/<uuid>").
func deviceIDFromHref(href string) string {
	if _, after, ok := strings.Cut(href, "/devices/"); ok {
		id, _, _ := strings.Cut(after, "/")
		return strings.ToLower(id)
	}
	href = strings.TrimRight(href, "/")
	if i := strings.LastIndexByte(href, '/'); i >= 0 {
		href = href[i+1:]
	}
	return strings.ToLower(href)
}
