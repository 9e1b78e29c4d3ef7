# METADATA
# title: Kubernetes label selectors in Rego
# description: |
#   Matches node labels against the requirements of a Kubernetes label
#   selector, as the CCM passes them (parsed by k8s.io/apimachinery's
#   labels.Parse, one object per requirement: key, operator, values). It is
#   its own package so that a custom BGP selection policy can reuse it.
package equinix.labelselector

# METADATA
# title: operators
# description: The operators labels.Parse produces, named as in k8s.io/apimachinery/pkg/selection.
operators := {"=", "==", "in", "!=", "notin", "exists", "!", "gt", "lt"}

# METADATA
# title: selected
# description: |
#   The names of the nodes (objects with "name" and "labels") whose labels
#   satisfy every requirement; all of them when there is no requirement (an
#   empty selector selects every node). It combines one set of names per
#   requirement instead of testing node by node, because per-node function
#   calls and negations cost several times more in OPA, and 5,000 nodes
#   are one decision of the CCM: the nodes every positive requirement
#   includes, minus those a negative one excludes.
selected(nodes, requirements) := without(candidates(nodes, included), excluded) if {
	included := {names | some req in requirements; names := including(nodes, req)}
	excluded := {names | some req in requirements; names := excluding(nodes, req)}
}

# METADATA
# title: matches
# description: |
#   True when labels satisfy every requirement: selected for one node, for
#   policies that look at nodes one at a time.
matches(labels, requirements) if {
	"node" in selected([{"name": "node", "labels": labels}], requirements)
}

# METADATA
# title: candidates
# description: |
#   The nodes in every included set; all nodes when no requirement is
#   positive (only !=, notin and ! requirements, or none).
candidates(nodes, included) := intersection(included) if {
	count(included) > 0
} else := {node.name | some node in nodes}

# METADATA
# title: without
# description: |
#   names minus every set in excluded; names itself when there is none,
#   which spares copying thousands of names for the common selectors.
without(names, excluded) := names if {
	count(excluded) == 0
} else := names - union(excluded)

# METADATA
# title: including (equality and set membership)
# description: The nodes with the label set to one of the requirement's values.
including(nodes, req) := with_value(nodes, req) if {
	req.operator in {"=", "==", "in"}
}

# METADATA
# title: including (exists)
# description: The nodes with the label, whatever its value (even empty).
including(nodes, req) := with_key(nodes, req.key) if {
	req.operator == "exists"
}

# METADATA
# title: including (greater than)
# description: The nodes whose label is an integer greater than the requirement's only value.
including(nodes, req) := {node.name |
	some node in nodes
	greater(node.labels[req.key], req.values[0])
} if {
	req.operator == "gt"
}

# METADATA
# title: including (less than)
# description: The nodes whose label is an integer less than the requirement's only value.
including(nodes, req) := {node.name |
	some node in nodes
	greater(req.values[0], node.labels[req.key])
} if {
	req.operator == "lt"
}

# METADATA
# title: including (unknown operator)
# description: No node matches an operator this library does not know.
including(_, req) := set() if {
	not req.operator in operators
}

# METADATA
# title: excluding (inequality and set exclusion)
# description: |
#   The nodes with the label set to one of the values; the others, with
#   another value or without the label, match "key!=v" and "key notin (v)",
#   as in Kubernetes.
excluding(nodes, req) := with_value(nodes, req) if {
	req.operator in {"!=", "notin"}
}

# METADATA
# title: excluding (does not exist)
# description: The nodes with the label, which "!key" excludes.
excluding(nodes, req) := with_key(nodes, req.key) if {
	req.operator == "!"
}

# METADATA
# title: with_value
# description: |
#   The nodes that have the requirement's label with one of its values.
#   Comparing with the only value ("key=value", the usual case), or
#   unifying with values[_], are the cheapest membership tests in OPA.
with_value(nodes, req) := {node.name |
	some node in nodes
	node.labels[key] == value
} if {
	key := req.key
	[value] := req.values
} else := {node.name |
	some node in nodes
	node.labels[key] == values[_]
} if {
	key := req.key
	values := req.values
}

# METADATA
# title: with_key
# description: |
#   The nodes that have the label key. A label value is a string, which is
#   never false, so the lookup alone tests that the key is there.
with_key(nodes, key) := {node.name |
	some node in nodes
	node.labels[key]
}

# METADATA
# title: has_key
# description: True when obj has the key, even with an empty value.
has_key(obj, key) if {
	_ = obj[key]
}

# METADATA
# title: greater
# description: True when a and b are integers (see integer) and a > b.
greater(a, b) if {
	integer(a) > integer(b)
}

# METADATA
# title: integer
# description: |
#   The decimal integer in s, as Kubernetes reads label values for gt and lt
#   (an optional sign, leading zeros allowed); undefined, never an error, when
#   s is not one, so a node whose label is not a number is simply not
#   selected.
integer(s) := sign(s) * magnitude(trim_left(trim_left(s, "+-"), "0")) if {
	is_string(s)
	regex.match(`^[+-]?[0-9]+$`, s)
}

# METADATA
# title: sign
# description: -1 for a negative number's text, else 1.
sign(s) := -1 if {
	startswith(s, "-")
} else := 1

# METADATA
# title: magnitude
# description: |
#   The number in digits (no sign, no leading zeros); 0 when digits is empty,
#   which is what "0" or "000" leave after their zeros are trimmed.
magnitude(digits) := 0 if {
	digits == ""
} else := to_number(digits)
