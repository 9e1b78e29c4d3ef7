package schema

import (
	"slices"
	"strconv"
	"strings"
)

// The rules below are what the API server checks of other built-in kinds
// beyond their schema, those TestValidatorAgreesWithAPIServer (host/lbmodule)
// met: ValidateService, ValidateRoleBinding, ValidateEndpointSlice, the
// workloads' pod template and selector, and int-or-percent fields
// (k8s.io/kubernetes/pkg/apis/*/validation, Kubernetes 1.37). The API
// server has many more (a container's image, a port's range, ...); those
// are not here, so for these kinds sdktest's pass is a good sign, not a
// promise (sdk/README.md).

// serviceRules: ports unless the Service is ExternalName or headless;
// externalTrafficPolicy only for one reachable from outside (NodePort,
// LoadBalancer; the type defaults to ClusterIP).
func serviceRules(w *walker, obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	typ, _ := spec["type"].(string)
	if typ == "" {
		typ = "ClusterIP"
	}
	ports, _ := spec["ports"].([]any)
	if clusterIP, _ := spec["clusterIP"].(string); len(ports) == 0 && typ != "ExternalName" && clusterIP != "None" {
		return w.failAt([]string{"spec", "ports"}, "required, but missing: a %s Service needs at least one port", typ)
	}
	if etp, _ := spec["externalTrafficPolicy"].(string); etp != "" && typ != "NodePort" && typ != "LoadBalancer" {
		return w.failAt([]string{"spec", "externalTrafficPolicy"}, "may only be set for a NodePort or LoadBalancer Service, not %s", typ)
	}
	return true
}

// roleBindingRules: the roleRef names a Role or ClusterRole of RBAC's
// group (a ClusterRoleBinding a ClusterRole only), by name.
func roleBindingRules(w *walker, obj map[string]any, cluster bool) bool {
	ref, _ := obj["roleRef"].(map[string]any)
	// An empty apiGroup is defaulted to RBAC's before validation.
	if g, _ := ref["apiGroup"].(string); g != "" && g != "rbac.authorization.k8s.io" {
		return w.failAt([]string{"roleRef", "apiGroup"}, `must be "rbac.authorization.k8s.io", got %q`, g)
	}
	kinds := []string{"Role", "ClusterRole"}
	if cluster {
		kinds = kinds[1:]
	}
	if k, _ := ref["kind"].(string); !slices.Contains(kinds, k) {
		return w.failAt([]string{"roleRef", "kind"}, "must be one of %s, got %q", quoteAll(kinds), k)
	}
	if n, _ := ref["name"].(string); n == "" {
		return w.failAt([]string{"roleRef", "name"}, "required, but missing")
	}
	return true
}

// endpointSliceRules: addressType is required and one of three.
func endpointSliceRules(w *walker, obj map[string]any) bool {
	types := []string{"IPv4", "IPv6", "FQDN"}
	if t, _ := obj["addressType"].(string); !slices.Contains(types, t) {
		if t == "" {
			return w.failAt([]string{"addressType"}, "required, but missing")
		}
		return w.failAt([]string{"addressType"}, "must be one of %s, got %q", quoteAll(types), t)
	}
	return true
}

// workloadRules (DaemonSet, Deployment, ReplicaSet, StatefulSet): the pod
// template has containers and labels the selector selects, and the
// rolling update's int-or-percent fields are percentages when strings.
func workloadRules(w *walker, obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	podSpec, _ := tmpl["spec"].(map[string]any)
	if cs, _ := podSpec["containers"].([]any); len(cs) == 0 {
		return w.failAt([]string{"spec", "template", "spec", "containers"}, "required, but missing: a pod template needs at least one container")
	}
	md, _ := tmpl["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	if sel, _ := spec["selector"].(map[string]any); !selects(sel, labels) {
		return w.failAt([]string{"spec", "template", "metadata", "labels"}, "the selector does not select the template's labels")
	}
	for _, strategy := range []string{"strategy", "updateStrategy"} {
		s, _ := spec[strategy].(map[string]any)
		ru, _ := s["rollingUpdate"].(map[string]any)
		for _, f := range []string{"maxUnavailable", "maxSurge"} {
			if !w.intOrPercent(ru, f, "spec", strategy, "rollingUpdate") {
				return false
			}
		}
	}
	return true
}

// podDisruptionBudgetRules: minAvailable and maxUnavailable are
// percentages when strings.
func podDisruptionBudgetRules(w *walker, obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	return w.intOrPercent(spec, "minAvailable", "spec") && w.intOrPercent(spec, "maxUnavailable", "spec")
}

// intOrPercent checks m[field], an int-or-string, for the API server's
// percentage form when it is a string: digits and '%'.
func (w *walker) intOrPercent(m map[string]any, field string, at ...string) bool {
	s, ok := m[field].(string)
	if !ok {
		return true
	}
	digits, pct := strings.CutSuffix(s, "%")
	if _, err := strconv.Atoi(digits); pct && err == nil && !strings.HasPrefix(digits, "-") && !strings.HasPrefix(digits, "+") {
		return true
	}
	return w.failAt(append(slices.Clone(at), field), "must be an integer or a percentage such as \"25%%\", got %q", s)
}

// selects reports whether a label selector (matchLabels, matchExpressions)
// selects labels. An empty selector is the schema's or the API server's
// to refuse, not this check's.
func selects(sel map[string]any, labels map[string]any) bool {
	if len(sel) == 0 {
		return true
	}
	ml, _ := sel["matchLabels"].(map[string]any)
	for k, v := range ml {
		if labels[k] != v {
			return false
		}
	}
	exprs, _ := sel["matchExpressions"].([]any)
	for _, e := range exprs {
		m, _ := e.(map[string]any)
		key, _ := m["key"].(string)
		op, _ := m["operator"].(string)
		v, has := labels[key].(string)
		var values []string
		vs, _ := m["values"].([]any)
		for _, x := range vs {
			if s, ok := x.(string); ok {
				values = append(values, s)
			}
		}
		switch op {
		case "In":
			if !has || !slices.Contains(values, v) {
				return false
			}
		case "NotIn":
			if has && slices.Contains(values, v) {
				return false
			}
		case "Exists":
			if !has {
				return false
			}
		case "DoesNotExist":
			if has {
				return false
			}
		}
	}
	return true
}
