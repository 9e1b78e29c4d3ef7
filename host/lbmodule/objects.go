package lbmodule

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// objectKey names one object the reconciler reads, applies or prunes: its
// kind and where it is.
type objectKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

// qualified is namespace/name, or name for a cluster-scoped object, for
// messages.
func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// mapping resolves a kind to its resource, cached for the sync in progress;
// a kind not found asks discovery again once.
func (r *Reconciler) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if m, ok := r.mappings[gvk]; ok {
		return m, nil
	}
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// The CRD may have been installed since discovery was cached.
		r.reset()
		m, err = r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err == nil && r.mappings != nil {
		r.mappings[gvk] = m
	}
	return m, err
}

// resource is the dynamic client of m's resource, in namespace ns if the
// kind is namespaced.
func (r *Reconciler) resource(m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.cfg.Dynamic.Resource(m.Resource).Namespace(ns)
	}
	return r.cfg.Dynamic.Resource(m.Resource)
}
