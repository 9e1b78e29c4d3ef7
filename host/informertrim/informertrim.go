// Package informertrim shrinks the objects the CCM's informers keep: at
// 10,000 Services and 1,000 nodes the informer caches are most of the
// CCM's live heap, and much of each object is bookkeeping the CCM never
// reads (managedFields above all: one entry per writer, with every field
// it owns).
//
// Transform is given to every shared informer of Services and Nodes: the
// CCM's own factory (informers.WithTransform) and the one
// k8s.io/cloud-provider builds for its controllers (SetTransform, from the
// provider's SetInformers). EndpointSlice is the transform of the CCM's
// informer of every EndpointSlice.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package informertrim

import (
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
)

// Transform trims a Service or a Node (other objects pass unchanged):
//
//   - A Service keeps of its managedFields only what host/eip reads of
//     them: whether fieldmanager.CCM owns spec.loadBalancerIP, and whether
//     it owns the annotation fieldmanager.AnnotationLoadBalancerIPs (a
//     Service with IPv6). That is one entry saying so, shared by every
//     Service that has the same, or none
//     (the CCM's own entries, one for the Service and one for its status,
//     were 8 MB of the heap at 10,000 Services, and the service
//     controller keeps a copy of each). No controller updates a Service
//     from the cache (the service controller patches), so the trimmed
//     list is never sent back; were it sent in an update, it would
//     replace the server's.
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
		o.ManagedFields = loadBalancerIPEntry(o.ManagedFields)
	case *v1.Node:
		o.ManagedFields = nil
		o.Status.Images = nil
	}
	return obj, nil
}

// The managedFields a trimmed Service has when the CCM wrote its
// spec.loadBalancerIP, its AnnotationLoadBalancerIPs, or both. Every such
// Service shares one: nothing writes to a cached object.
var (
	lbIPFields           = `"f:spec":{"f:loadBalancerIP":{}}`
	lbIPsFields          = `"f:metadata":{"f:annotations":{"f:` + fieldmanager.AnnotationLoadBalancerIPs + `":{}}}`
	wroteLoadBalancerIP  = ccmEntry(`{` + lbIPFields + `}`)
	wroteLoadBalancerIPs = ccmEntry(`{` + lbIPsFields + `}`)
	wroteBoth            = ccmEntry(`{` + lbIPsFields + `,` + lbIPFields + `}`)
)

func ccmEntry(fields string) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(fields)}}
}

// loadBalancerIPEntry is the trimmed form of a Service's managedFields.
func loadBalancerIPEntry(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	ip := fieldmanager.WroteLoadBalancerIP(entries)
	ips := fieldmanager.WroteAnnotation(entries, fieldmanager.AnnotationLoadBalancerIPs)
	switch {
	case ip && ips:
		return wroteBoth
	case ip:
		return wroteLoadBalancerIP
	case ips:
		return wroteLoadBalancerIPs
	}
	return nil
}

// EndpointSlice is the transform of the CCM's EndpointSlice informer (its
// own, not the shared factory's: the control-plane EIP reads whole slices
// of its own): an EndpointSlice keeps its name, namespace, UID,
// resourceVersion and Service (the kubernetes.io/service-name label), and
// per endpoint only its node and its ready condition, which is all the
// NoAnnouncingNode check reads (host/lbmodule). The informer watches every
// EndpointSlice of the cluster; the addresses, ports, zones, target
// references and managedFields it drops are most of each. Other objects
// pass unchanged.
func EndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion},
		AddressType: s.AddressType,
	}
	if svc, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, len(s.Endpoints))
		for i, e := range s.Endpoints {
			out.Endpoints[i] = discoveryv1.Endpoint{NodeName: e.NodeName, Conditions: discoveryv1.EndpointConditions{Ready: e.Conditions.Ready}}
		}
	}
	return out, nil
}
