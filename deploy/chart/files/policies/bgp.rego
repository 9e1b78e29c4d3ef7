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
#   node.kubernetes.io/exclude-from-external-load-balancers.
selected_nodes := labelselector.selected(input.nodes, input.bgpNodeSelector) - excluded_nodes

# METADATA
# title: exclude_label
# description: |
#   The well-known label that takes a node out of external load balancers
#   (most installers put it on control-plane nodes). Kubernetes' service
#   controller honours it whatever its value, so this policy does too.
exclude_label := "node.kubernetes.io/exclude-from-external-load-balancers"

# METADATA
# title: excluded_nodes
# description: Nodes that carry exclude_label, with any value.
excluded_nodes contains node.name if {
	some node in input.nodes
	labelselector.has_key(object.get(node, "labels", {}), exclude_label)
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
