// Package kubenames checks Kubernetes object names, label keys and values,
// and label selectors with the rules of k8s.io/apimachinery, without
// depending on it.
//
// Why a copy of the rules: the module runtime (sdk/wasmhost) validates a
// module's output before anything reaches the cluster, and sdktest runs the
// same validation on a module author's machine. Keeping these few checks in
// the SDK module lets an author require the SDK without the CCM's Kubernetes
// dependency graph, while the CCM and sdktest still refuse exactly the same
// output. A test in the CCM's module (host/lbmodule) cross-checks every
// function here against apimachinery's, with a table and a fuzz target, so
// the copy cannot drift unnoticed when apimachinery is upgraded.
package kubenames

import (
	"errors"
	"fmt"
	"strings"
)

const (
	maxLabel     = 63
	maxSubdomain = 253
)

// The rules of apimachinery's regular expressions, checked byte by byte:
// the host validates every label and annotation of a module's output, and
// at 1,000 Services the regular expressions were a third of that.

// isDNSLabel: [a-z0-9]([-a-z0-9]*[a-z0-9])?
func isDNSLabel(v string) bool {
	if v == "" || !isLowerAlnum(v[0]) || !isLowerAlnum(v[len(v)-1]) {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		if !isLowerAlnum(v[i]) && v[i] != '-' {
			return false
		}
	}
	return true
}

// isDNSSubdomain: DNS labels joined by '.'.
func isDNSSubdomain(v string) bool {
	for {
		label, rest, more := strings.Cut(v, ".")
		if !isDNSLabel(label) {
			return false
		}
		if !more {
			return true
		}
		v = rest
	}
}

// isLabelName: ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
func isLabelName(v string) bool {
	if v == "" || !isAlnum(v[0]) || !isAlnum(v[len(v)-1]) {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		if c := v[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || c >= 'A' && c <= 'Z' }

// ValidateDNS1123Label checks an RFC 1123 label, such as a namespace name:
// at most 63 lower-case alphanumerics or '-', beginning and ending with an
// alphanumeric.
func ValidateDNS1123Label(v string) error {
	switch {
	case len(v) > maxLabel:
		return fmt.Errorf("must be no more than %d characters", maxLabel)
	case isDNSLabel(v):
		return nil
	case isDNSSubdomain(v):
		return errors.New("must not contain dots")
	}
	return errors.New("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character")
}

// ValidateDNS1123Subdomain checks an RFC 1123 subdomain, the rule for most
// object names: at most 253 characters, dot-separated RFC 1123 labels.
func ValidateDNS1123Subdomain(v string) error {
	if len(v) > maxSubdomain {
		return fmt.Errorf("must be no more than %d characters", maxSubdomain)
	}
	if !isDNSSubdomain(v) {
		return errors.New("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
	}
	return nil
}

// ValidateQualifiedName checks a label or annotation key: an optional DNS
// subdomain prefix and '/', then a name of at most 63 alphanumerics, '-',
// '_' or '.', beginning and ending with an alphanumeric.
func ValidateQualifiedName(v string) error {
	prefix, name, hasPrefix := strings.Cut(v, "/")
	if !hasPrefix {
		name = v
	}
	switch {
	case strings.Contains(name, "/"):
		return errors.New("a qualified name must be a name with an optional DNS subdomain prefix and one '/' (e.g. 'example.com/MyName')")
	case hasPrefix && prefix == "":
		return errors.New("prefix part must be non-empty")
	case hasPrefix:
		if err := ValidateDNS1123Subdomain(prefix); err != nil {
			return fmt.Errorf("prefix part %v", err)
		}
	}
	switch {
	case name == "":
		return errors.New("name part must be non-empty")
	case len(name) > maxLabel:
		return fmt.Errorf("name part must be no more than %d characters", maxLabel)
	case !isLabelName(name):
		return errors.New("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")
	}
	return nil
}

// ValidateLabelValue checks a label value: empty, or at most 63
// alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric.
func ValidateLabelValue(v string) error {
	if len(v) > maxLabel {
		return fmt.Errorf("must be no more than %d characters", maxLabel)
	}
	if v != "" && !isLabelName(v) {
		return errors.New("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")
	}
	return nil
}

// ValidatePathSegmentName checks a name the API server only needs to put
// in a URL path (the rule for RBAC's kinds and PodDisruptionBudget): not
// empty, "." or "..", and without '/' or '%'.
func ValidatePathSegmentName(v string) error {
	switch {
	case v == "":
		return errors.New("must not be empty")
	case v == "." || v == "..":
		return fmt.Errorf("may not be %q", v)
	case strings.ContainsAny(v, "/%"):
		return errors.New("may not contain '/' or '%'")
	}
	return nil
}

// ValidateObjectName checks an object's name by the rule the API server
// applies to its kind: an RFC 1123 label for a Service (Kubernetes 1.37
// relaxed it from an RFC 1035 one: "1lb" is a valid name) and a Namespace,
// a path segment for RBAC's kinds and PodDisruptionBudget, and an RFC 1123
// subdomain for every other kind (custom resources included).
func ValidateObjectName(apiVersion, kind, name string) error {
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	switch {
	case group == "" && (kind == "Service" || kind == "Namespace"):
		return ValidateDNS1123Label(name)
	case group == "rbac.authorization.k8s.io",
		group == "policy" && kind == "PodDisruptionBudget":
		return ValidatePathSegmentName(name)
	}
	return ValidateDNS1123Subdomain(name)
}
