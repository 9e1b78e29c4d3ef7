# METADATA
# title: BGP node selection without control-plane nodes
# description: |
#   Replaces the default policies/bgp.rego. Like the default it honours the
#   bgpNodeSelector setting and the exclusion label, and in addition it
#   never selects control-plane nodes, so that Service traffic does not land
#   on the API servers even when the selector is empty and no installer put
#   the exclusion label on them.
package equinix.bgp

import data.equinix.labelselector

# METADATA
# title: control_plane_labels
# description: Labels that mark a control-plane node (the second is the pre-1.24 name).
control_plane_labels := {"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

# METADATA
# title: selected_nodes
# description: |
#   Nodes that match the selector, are not control-plane nodes and are not
#   excluded by the exclusion label.
selected_nodes := (labelselector.selected(input.nodes, input.bgpNodeSelector) - control_plane_nodes) - excluded_nodes

# METADATA
# title: exclude_label
# description: |
#   As in the default: the label that takes a node out of external load
#   balancers, its value read as Go's strconv.ParseBool reads it (false
#   keeps the node, anything else leaves it out), as Kubernetes' service
#   controller does.
exclude_label := "node.kubernetes.io/exclude-from-external-load-balancers"

# METADATA
# title: false_values
# description: The spellings strconv.ParseBool reads as false.
false_values := {"0", "f", "F", "false", "FALSE", "False"}

# METADATA
# title: excluded_nodes
# description: Nodes that carry exclude_label with a value other than false.
excluded_nodes contains node.name if {
	some node in input.nodes
	labels := object.get(node, "labels", {})
	labelselector.has_key(labels, exclude_label)
	not labels[exclude_label] in false_values
}

# METADATA
# title: control_plane_nodes
# description: Nodes with a control-plane role label, whatever its value.
control_plane_nodes contains node.name if {
	some node in input.nodes
	some key in control_plane_labels
	labelselector.has_key(object.get(node, "labels", {}), key)
}

# METADATA
# title: deny
# description: As in the default, an operator this policy does not know is refused.
deny contains msg if {
	some req in input.bgpNodeSelector
	not req.operator in labelselector.operators
	msg := sprintf(
		"the BGP selection policy does not know operator %q of the bgpNodeSelector requirement on %q; use =, ==, !=, in, notin, exists, !, gt or lt",
		[req.operator, req.key],
	)
}
