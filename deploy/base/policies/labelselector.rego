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
# title: matches
# description: |
#   True when labels satisfy every requirement, so an empty list of
#   requirements matches every set of labels (an empty selector selects all).
matches(labels, requirements) if {
	every req in requirements {
		requirement_matches(labels, req)
	}
}

# METADATA
# title: requirement_matches (equality and set membership)
# description: The label exists and its value is one of the requirement's values.
requirement_matches(labels, req) if {
	req.operator in {"=", "==", "in"}
	labels[req.key] in req.values
}

# METADATA
# title: requirement_matches (inequality and set exclusion)
# description: |
#   The label is missing or its value is none of the values: Kubernetes
#   selects a node without the label for "key!=v" and "key notin (v)".
requirement_matches(labels, req) if {
	req.operator in {"!=", "notin"}
	not has_value_in(labels, req.key, req.values)
}

# METADATA
# title: requirement_matches (exists)
# description: The label exists, whatever its value (even empty).
requirement_matches(labels, req) if {
	req.operator == "exists"
	has_key(labels, req.key)
}

# METADATA
# title: requirement_matches (does not exist)
# description: The label is missing ("!key").
requirement_matches(labels, req) if {
	req.operator == "!"
	not has_key(labels, req.key)
}

# METADATA
# title: requirement_matches (greater than)
# description: The label's value is an integer greater than the requirement's only value.
requirement_matches(labels, req) if {
	req.operator == "gt"
	integer(labels[req.key]) > integer(req.values[0])
}

# METADATA
# title: requirement_matches (less than)
# description: The label's value is an integer less than the requirement's only value.
requirement_matches(labels, req) if {
	req.operator == "lt"
	integer(labels[req.key]) < integer(req.values[0])
}

# METADATA
# title: has_key
# description: True when obj has the key, even with an empty value.
has_key(obj, key) if {
	_ = obj[key]
}

# METADATA
# title: has_value_in
# description: True when obj has the key and its value is one of values.
has_value_in(obj, key, values) if {
	obj[key] in values
}

# METADATA
# title: integer
# description: |
#   The decimal integer in s, as Kubernetes reads label values for gt and lt
#   (an optional sign, leading zeros allowed); undefined, never an error, when
#   s is not one, so a node whose label is not a number is simply not
#   selected.
integer(s) := sign(s) * magnitude(trim_left(trim_left(s, "+-"), "0")) if {
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
