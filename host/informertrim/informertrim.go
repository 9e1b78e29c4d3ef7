// Package informertrim shrinks the objects the CCM's informers keep: at
// 10,000 Services and 1,000 nodes the informer caches are most of the
// CCM's live heap, and much of each object is bookkeeping the CCM never
// reads (managedFields above all: one entry per writer, with every field
// it owns).
//
// Transform is given to every shared informer of Services and Nodes: the
// CCM's own factory (informers.WithTransform) and the one
// k8s.io/cloud-provider builds for its controllers (SetTransform, from the
// provider's SetInformers).
package informertrim

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
)

// Transform trims a Service or a Node (other objects pass unchanged):
//
//   - A Service keeps only the managedFields entries of fieldmanager.CCM:
//     host/eip reads them to tell whether the CCM wrote
//     spec.loadBalancerIP. No controller updates a Service from the cache
//     (the service controller patches), so the trimmed list is never sent
//     back; were it sent in an update, it would replace the server's.
//   - A Node drops managedFields (no reader; an update that carries none
//     keeps the server's, and the node controller updates Nodes from the
//     cache) and status.images (the container images on the node: often
//     the largest part of a Node, read by nothing in a CCM).
//
// A tombstone (cache.DeletedFinalStateUnknown) is never passed to a
// transform, so only the object types matter.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		o.ManagedFields = ccmEntries(o.ManagedFields)
	case *v1.Node:
		o.ManagedFields = nil
		o.Status.Images = nil
	}
	return obj, nil
}

// ccmEntries returns the entries of fieldmanager.CCM, in a slice of their
// own so the rest can be collected.
func ccmEntries(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	n := 0
	for _, e := range entries {
		if e.Manager == fieldmanager.CCM {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]metav1.ManagedFieldsEntry, 0, n)
	for _, e := range entries {
		if e.Manager == fieldmanager.CCM {
			out = append(out, e)
		}
	}
	return out
}
