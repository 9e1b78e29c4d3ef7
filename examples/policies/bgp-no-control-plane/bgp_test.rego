package equinix.bgp_no_control_plane_test

import data.equinix.bgp

nodes := [
	{"name": "cp-1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
	{"name": "cp-old", "labels": {"node-role.kubernetes.io/master": "true", "pool": "a"}},
	{"name": "w-1", "labels": {"pool": "a"}},
	{"name": "w-2", "labels": {"pool": "b"}},
	{"name": "bare"},
]

test_empty_selector_skips_control_plane if {
	got := bgp.selected_nodes with input as {"nodes": nodes, "bgpNodeSelector": []}
	got == {"w-1", "w-2", "bare"}
}

test_selector_still_applies if {
	got := bgp.selected_nodes with input as {"nodes": nodes, "bgpNodeSelector": [{"key": "pool", "operator": "=", "values": ["a"]}]}
	got == {"w-1"}
}

test_unknown_operator_is_denied if {
	msgs := bgp.deny with input as {"nodes": nodes, "bgpNodeSelector": [{"key": "pool", "operator": "~", "values": []}]}
	count(msgs) == 1
}

test_no_deny_for_known_operators if {
	count(bgp.deny) == 0 with input as {"nodes": nodes, "bgpNodeSelector": [{"key": "pool", "operator": "exists", "values": []}]}
}

# As the default does: the exclusion label leaves a worker out too, unless
# its value is false.
test_exclusion_label_still_honoured if {
	labelled := array.concat(nodes, [
		{"name": "w-out", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}},
		{"name": "w-in", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "false"}},
	])
	got := bgp.selected_nodes with input as {"nodes": labelled, "bgpNodeSelector": []}
	got == {"w-1", "w-2", "bare", "w-in"}
}
