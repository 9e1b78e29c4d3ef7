# METADATA
# title: BGP node selection without control-plane nodes
# description: |
#   Replaces the default policies/bgp.rego. Like the default it honours the
#   bgpNodeSelector setting, and in addition it never selects control-plane
#   nodes, so that Service traffic does not land on the API servers even
#   when the selector is empty.
package equinix.bgp

import data.equinix.labelselector

# METADATA
# title: control_plane_labels
# description: Labels that mark a control-plane node (the second is the pre-1.24 name).
control_plane_labels := {"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

# METADATA
# title: selected_nodes
# description: Nodes that match the selector and are not control-plane nodes.
selected_nodes := labelselector.selected(input.nodes, input.bgpNodeSelector) - control_plane_nodes

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
