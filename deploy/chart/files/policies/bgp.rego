# METADATA
# title: BGP node selection
# description: |
#   Decides which nodes get BGP sessions and peer annotations. The CCM
#   queries data.equinix.bgp.selected_nodes and data.equinix.bgp.deny once
#   for all nodes; see policies/README.md for the input document.
package equinix.bgp

import data.equinix.labelselector

# METADATA
# title: selected_nodes
# description: |
#   The names of the nodes whose labels match every requirement of the
#   bgpNodeSelector setting (every node when the setting is empty, as
#   upstream does), except the nodes labelled
#   node.kubernetes.io/exclude-from-external-load-balancers with a value
#   other than false.
selected_nodes := labelselector.selected(input.nodes, input.bgpNodeSelector) - excluded_nodes

# METADATA
# title: exclude_label
# description: |
#   The well-known label that takes a node out of external load balancers
#   (most installers put it on control-plane nodes). Kubernetes' service
#   controller reads its value with Go's strconv.ParseBool: a false value
#   keeps the node, any other value (true, empty, unparsable) leaves it out.
#   This policy decides the same.
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
# title: deny
# description: |
#   Refuses a selector requirement whose operator this policy does not know,
#   rather than silently selecting no node for it.
deny contains msg if {
	some req in input.bgpNodeSelector
	not req.operator in labelselector.operators
	msg := sprintf(
		"the BGP selection policy does not know operator %q of the bgpNodeSelector requirement on %q; use =, ==, !=, in, notin, exists, !, gt or lt",
		[req.operator, req.key],
	)
}
