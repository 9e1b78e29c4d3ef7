# METADATA
# title: Elastic IP placement near the BGP nodes
# description: |
#   Replaces the default policies/eip.rego. Keeps the documented order
#   (global facility, global metro, Service facility annotation, Service
#   metro annotation) but, where the default gives up, reserves the EIP in
#   the metro where most of the cluster's BGP nodes are, so that a
#   multi-metro cluster needs no setting and no annotation.
package equinix.eip

import data.equinix.bgp

# METADATA
# title: placement
# description: |
#   {"facility": ...} or {"metro": ...}: the default order, then the metro
#   of most BGP nodes.
placement := {"facility": input.config.facility} if {
	input.config.facility != ""
} else := {"metro": input.config.metro} if {
	input.config.metro != ""
} else := {"facility": facility} if {
	facility := service_annotation(input.config.annotationEIPFacility)
} else := {"metro": metro} if {
	metro := service_annotation(input.config.annotationEIPMetro)
} else := {"metro": metro} if {
	metro := majority_metro
}

# METADATA
# title: deny
# description: Explains what to set when no BGP node has a known metro either.
deny contains msg if {
	not placement
	msg := sprintf(
		"no location for the Elastic IP of Service %s/%s: no BGP node has a known metro; set the metro of the CCM (METAL_METRO_NAME) or annotate the Service with %s=<metro>",
		[input.service.namespace, input.service.name, input.config.annotationEIPMetro],
	)
}

# METADATA
# title: service_annotation
# description: The Service annotation called name, undefined when missing or empty.
service_annotation(name) := value if {
	value := input.service.annotations[name]
	value != ""
}

# METADATA
# title: bgp_metros
# description: |
#   The metro of each BGP node, one entry per node. It asks the BGP
#   selection policy in use (the same input carries nodes and selector), so
#   a custom selection policy is honoured too.
bgp_metros := [node.metro |
	some node in input.nodes
	node.name in bgp.selected_nodes
	node.metro != ""
]

# METADATA
# title: metro_counts
# description: How many BGP nodes each metro has.
metro_counts := {metro: count([m | some m in bgp_metros; m == metro]) |
	some metro in {m | some m in bgp_metros}
}

# METADATA
# title: majority_metro
# description: |
#   The metro with the most BGP nodes; on a tie the alphabetically first,
#   so the choice is the same every time. Undefined without BGP nodes.
majority_metro := min({metro |
	some metro, n in metro_counts
	n == max({c | some c in metro_counts})
})
