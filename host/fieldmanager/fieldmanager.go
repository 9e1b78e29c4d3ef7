// Package fieldmanager names this CCM to the Kubernetes API server: the
// field manager of every write (server-side apply and patches alike), so
// that managedFields tell a cluster operator which fields are ours and so
// that a later apply by the same manager removes what it stops sending.
//
// It is a package of its own, importing only the API types, so every
// writer (bgp, eip, controlplane, lbmodule, provider) can use the one name
// without an import cycle.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package fieldmanager

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// CCM owns every object and field this CCM writes, and is the user
	// agent and event source it reports as. It is upstream's name, so a
	// cluster moving from upstream keeps ownership of its fields.
	CCM = "cloud-provider-equinix-metal"

	// ModuleNodeAnnotations owns the node annotations a load-balancer module
	// asks for. It is not CCM on purpose: the core applies the BGP
	// annotations on the same nodes, and server-side apply drops whatever a
	// manager stops sending, so sharing a manager would make each remove the
	// other's.
	ModuleNodeAnnotations = CCM + "-lbmodule"

	// AnnotationLoadBalancerIPs is MetalLB's annotation of the addresses a
	// Service asks for, where host/eip writes a Service's Elastic IPs once
	// it has IPv6. It is named here because host/eip and host/informertrim
	// both read who wrote it.
	AnnotationLoadBalancerIPs = "metallb.io/loadBalancerIPs"
)

// WroteLoadBalancerIP reports whether CCM owns spec.loadBalancerIP among
// a Service's managedFields: whether the address there is one the CCM
// reserved and wrote, rather than one the user asked for.
func WroteLoadBalancerIP(entries []metav1.ManagedFieldsEntry) bool {
	for _, mf := range entries {
		if mf.Manager != CCM || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) == nil {
			if _, ok := fields.Spec["f:loadBalancerIP"]; ok {
				return true
			}
		}
	}
	return false
}

// WroteAnnotation reports whether CCM owns the annotation key among an
// object's managedFields: whether its value is one the CCM wrote.
func WroteAnnotation(entries []metav1.ManagedFieldsEntry, key string) bool {
	for _, mf := range entries {
		if mf.Manager != CCM || mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) == nil {
			if _, ok := fields.Metadata.Annotations["f:"+key]; ok {
				return true
			}
		}
	}
	return false
}
