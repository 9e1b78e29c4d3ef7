package equinix.labelselector_test

import data.equinix.labelselector

node_labels := {"zone": "da11", "role": "worker", "gpu": "", "rack": "12", "cores": "+8"}

req(key, operator, values) := {"key": key, "operator": operator, "values": values}

# cases lists, per operator, requirements that match node_labels and ones
# that do not; each is checked on its own.
matching := [
	req("zone", "=", ["da11"]),
	req("zone", "==", ["da11"]),
	req("zone", "in", ["ny5", "da11"]),
	req("zone", "!=", ["ny5"]),
	req("missing", "!=", ["x"]),
	req("zone", "notin", ["ny5", "sv15"]),
	req("missing", "notin", ["x"]),
	req("gpu", "exists", []),
	req("missing", "!", []),
	req("rack", "gt", ["11"]),
	req("rack", "gt", ["-3"]),
	req("cores", "gt", ["7"]),
	req("rack", "lt", ["13"]),
]

not_matching := [
	req("zone", "=", ["ny5"]),
	req("missing", "=", ["da11"]),
	req("zone", "==", ["ny5"]),
	req("zone", "in", ["ny5", "sv15"]),
	req("missing", "in", ["x"]),
	req("zone", "!=", ["da11"]),
	req("zone", "notin", ["ny5", "da11"]),
	req("missing", "exists", []),
	req("gpu", "!", []),
	req("rack", "gt", ["12"]),
	req("rack", "lt", ["12"]),
	req("missing", "gt", ["1"]),
	req("missing", "lt", ["1"]),
	req("role", "gt", ["1"]),
	req("role", "lt", ["1"]),
	req("zone", "~=", ["da11"]),
]

test_each_matching_requirement if {
	every r in matching {
		labelselector.matches(node_labels, [r])
	}
}

test_each_non_matching_requirement if {
	every r in not_matching {
		not labelselector.matches(node_labels, [r])
	}
}

test_empty_selector_matches_anything if {
	labelselector.matches({}, [])
	labelselector.matches(node_labels, [])
}

test_nodes_without_labels if {
	nodes := [{"name": "bare"}, {"name": "labelled", "labels": {"zone": "da11"}}]
	labelselector.selected(nodes, []) == {"bare", "labelled"}
	labelselector.selected(nodes, [req("zone", "!", [])]) == {"bare"}
	labelselector.selected(nodes, [req("zone", "!=", ["da11"])]) == {"bare"}
	labelselector.selected(nodes, [req("zone", "exists", [])]) == {"labelled"}
	labelselector.selected(nodes, [req("zone", "=", ["da11"])]) == {"labelled"}
	labelselector.selected(nodes, [req("zone", "~=", ["da11"])]) == set()
}

test_requirements_are_anded if {
	labelselector.matches(node_labels, [req("zone", "=", ["da11"]), req("role", "=", ["worker"])])
	not labelselector.matches(node_labels, [req("zone", "=", ["da11"]), req("role", "=", ["control-plane"])])
}

test_has_key if {
	labelselector.has_key({"a": ""}, "a")
	not labelselector.has_key({"a": ""}, "b")
}

test_integer_parsing if {
	labelselector.integer("42") == 42
	labelselector.integer("-7") == -7
	labelselector.integer("+8") == 8
	labelselector.integer("007") == 7
	labelselector.integer("-007") == -7
	labelselector.integer("000") == 0
	labelselector.integer("0") == 0
	not labelselector.integer("1.5")
	not labelselector.integer("x1")
	not labelselector.integer("")
	not labelselector.integer("+-1")
	not labelselector.integer("-")
	not labelselector.integer(null)
	not labelselector.integer(3)
}
