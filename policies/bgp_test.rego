package equinix.bgp_test

import data.equinix.bgp

nodes := [
	{"name": "cp-1", "labels": {"node-role.kubernetes.io/control-plane": "", "zone": "da11"}},
	{"name": "worker-1", "labels": {"bgp": "yes", "zone": "da11"}},
	{"name": "worker-2", "labels": {"bgp": "yes", "zone": "ny5"}},
	{"name": "bare"},
]

test_empty_selector_selects_every_node if {
	got := bgp.selected_nodes with input as {"nodes": nodes, "bgpNodeSelector": []}
	got == {"cp-1", "worker-1", "worker-2", "bare"}
}

test_selector_selects_matching_nodes if {
	got := bgp.selected_nodes with input as {"nodes": nodes, "bgpNodeSelector": [
		{"key": "bgp", "operator": "=", "values": ["yes"]},
		{"key": "zone", "operator": "in", "values": ["da11"]},
	]}
	got == {"worker-1"}
}

test_node_without_labels_matches_negative_requirements if {
	got := bgp.selected_nodes with input as {"nodes": nodes, "bgpNodeSelector": [
		{"key": "node-role.kubernetes.io/control-plane", "operator": "!", "values": []},
		{"key": "zone", "operator": "notin", "values": ["ny5"]},
	]}
	got == {"worker-1", "bare"}
}

test_no_match_is_empty_set if {
	got := bgp.selected_nodes with input as {"nodes": nodes, "bgpNodeSelector": [{"key": "nope", "operator": "exists", "values": []}]}
	got == set()
}

excluded := array.concat(nodes, [
	{"name": "cp-2", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "", "bgp": "yes"}},
	{"name": "cp-3", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}},
])

test_exclusion_label_leaves_node_out_with_empty_selector if {
	got := bgp.selected_nodes with input as {"nodes": excluded, "bgpNodeSelector": []}
	got == {"cp-1", "worker-1", "worker-2", "bare"}
}

test_exclusion_label_wins_over_a_matching_selector if {
	got := bgp.selected_nodes with input as {"nodes": excluded, "bgpNodeSelector": [{"key": "bgp", "operator": "=", "values": ["yes"]}]}
	got == {"worker-1", "worker-2"}
}

test_no_deny_for_known_operators if {
	count(bgp.deny) == 0 with input as {"nodes": nodes, "bgpNodeSelector": [{"key": "zone", "operator": "!=", "values": ["x"]}]}
}

test_unknown_operator_is_denied if {
	msgs := bgp.deny with input as {"nodes": nodes, "bgpNodeSelector": [{"key": "zone", "operator": "~=", "values": ["x"]}]}
	count(msgs) == 1
	some msg in msgs
	contains(msg, `operator "~="`)
	contains(msg, `on "zone"`)
}

# Kubernetes' service controller reads the exclusion label's value with Go's
# strconv.ParseBool: a false value keeps the node, anything it cannot parse
# (an empty value too) leaves it out.
test_exclusion_label_false_keeps_the_node if {
	labelled := array.concat(nodes, [
		{"name": "keep-false", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "false"}},
		{"name": "keep-0", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "0"}},
		{"name": "keep-False", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "False"}},
		{"name": "out-yes", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "yes"}},
		{"name": "out-1", "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "1"}},
	])
	got := bgp.selected_nodes with input as {"nodes": labelled, "bgpNodeSelector": []}
	got == {"cp-1", "worker-1", "worker-2", "bare", "keep-false", "keep-0", "keep-False"}
}
