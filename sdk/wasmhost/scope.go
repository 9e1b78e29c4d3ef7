package wasmhost

import (
	"strings"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// namespacedKinds are the well-known namespaced kinds by API group ("" is
// the core group); every kind of the groups mapped to nil is namespaced.
// The loader knows no cluster, so it can only refuse what it knows; the
// reconciler refuses any other namespaced kind declared without a
// namespace when it resolves the kind (host/lbmodule's prune).
var namespacedKinds = map[string]map[string]bool{
	"": set("ConfigMap", "Secret", "Service", "Endpoints", "Pod", "ServiceAccount", "PersistentVolumeClaim",
		"Event", "LimitRange", "ResourceQuota", "ReplicationController", "PodTemplate"),
	"apps":                      set("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "ControllerRevision"),
	"batch":                     set("Job", "CronJob"),
	"coordination.k8s.io":       set("Lease"),
	"discovery.k8s.io":          set("EndpointSlice"),
	"networking.k8s.io":         set("NetworkPolicy", "Ingress"),
	"policy":                    set("PodDisruptionBudget"),
	"rbac.authorization.k8s.io": set("Role", "RoleBinding"),
	"events.k8s.io":             set("Event"),
	"metallb.io":                nil, // every MetalLB resource lives in MetalLB's namespace
}

func set(kinds ...string) map[string]bool {
	out := make(map[string]bool, len(kinds))
	for _, k := range kinds {
		out[k] = true
	}
	return out
}

// isNamespaced reports whether apiVersion/kind is a well-known namespaced
// kind.
func isNamespaced(apiVersion, kind string) bool {
	group := ""
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		group = g
	}
	kinds, known := namespacedKinds[group]
	return known && (kinds == nil || kinds[kind])
}

// checkScopes refuses a well-known namespaced kind declared without a
// namespace: its objects could only be pruned across every namespace of
// the cluster, including objects of the same kind that another CCM
// process or module owns.
func checkScopes(d sdk.Description) error {
	for _, k := range d.Emits {
		if k.Namespace == "" && isNamespaced(k.APIVersion, k.Kind) {
			return invalid("declares the namespaced kind %s (%s) without a namespace; declare its namespace in describe, for a module from the loadbalancer URL option ?namespace=<namespace> (for example wasm:///etc/ccm/modules/mine.wasm?namespace=lb)", k.Kind, k.APIVersion)
		}
	}
	return nil
}
