package lbsnapshot

import v1 "k8s.io/api/core/v1"

// The Service rules every part of the CCM that handles Services shares:
// which Services this provider load-balances, their sharing key, and the
// control-plane Service that none of them may touch. They live here, in the
// pure floor, so the Elastic IP, BGP and control-plane loops and the
// module's input read one rule each, not each other.

// WantsLoadBalancer is the one rule of which Services this provider
// load-balances: exactly those k8s.io/cloud-provider's service controller
// hands to EnsureLoadBalancer, the Services of type LoadBalancer without a
// spec.loadBalancerClass (a class names another load balancer, and the
// controller leaves such a Service to it). The callers that need a
// narrower or wider set build it from this rule (host/eip's owner tags and
// key groups, Build's Services for the module).
func WantsLoadBalancer(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// The sharing key: Services that carry the same one get one Elastic IP
// between them. These are MetalLB's annotations, which users of shared
// addresses already write (MetalLB needs them on every Service of the
// address too).
const (
	// SharingAnnotation is MetalLB's current annotation (MetalLB >= 0.13
	// reads both forms; it prefers this one).
	SharingAnnotation = "metallb.io/allow-shared-ip"
	// LegacySharingAnnotation is the older form, the only one MetalLB <= 0.12
	// reads.
	LegacySharingAnnotation = "metallb.universe.tf/allow-shared-ip"
)

// SharingKey is the Service's sharing key, by MetalLB's own rule: the
// metallb.io/ annotation when it is present (even empty, which means no
// sharing), else the metallb.universe.tf/ one. "" means not shared. It is
// both the key host/eip gives one Elastic IP per and the key a module is
// told (sdk.Service.SharingKey), so the two never disagree.
func SharingKey(svc *v1.Service) string {
	if v, ok := svc.Annotations[SharingAnnotation]; ok {
		return v
	}
	return svc.Annotations[LegacySharingAnnotation]
}

// The external control-plane Service, which host/controlplane applies: the
// names are upstream's, so a cluster moving from upstream keeps its
// objects.
const (
	// ControlPlaneServiceNamespace is its namespace.
	ControlPlaneServiceNamespace = "kube-system"
	// ControlPlaneServiceName is its name.
	ControlPlaneServiceName = "cloud-provider-equinix-metal-kubernetes-external"
)

// IsControlPlaneService reports whether namespace/name is the external
// control-plane Service. The Service load-balancer code skips it: its IP is
// the control-plane EIP, which host/controlplane owns, so no EIP may be
// reserved and no load-balancer config generated for it. Answering the
// service controller with cloudprovider.ImplementedElsewhere also keeps
// that controller from overwriting the status host/controlplane applies.
func IsControlPlaneService(namespace, name string) bool {
	return namespace == ControlPlaneServiceNamespace && name == ControlPlaneServiceName
}

// ourLoadBalancer: a Service the service controller hands this provider
// (WantsLoadBalancer: a Service with a loadBalancerClass belongs to
// another load balancer), other than the control-plane Service, which has
// its own EIP: no other Service may reach a module.
func ourLoadBalancer(s *v1.Service) bool {
	return WantsLoadBalancer(s) && !IsControlPlaneService(s.Namespace, s.Name)
}
