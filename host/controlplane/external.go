package controlplane

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// The external Service is what makes the EIP routable inside the cluster:
// kube-proxy on every node installs rules for a LoadBalancer Service's
// ingress IP, and its EndpointSlice sends that traffic to the apiservers.
// The names are upstream's, so a cluster moving from upstream keeps its
// objects.
const (
	// externalServiceName is the name of the Service that carries the EIP:
	// lbsnapshot's, whose IsControlPlaneService is how the Service code
	// knows to leave it alone.
	externalServiceName = lbsnapshot.ControlPlaneServiceName
	// externalServiceNamespace is its namespace.
	externalServiceNamespace = lbsnapshot.ControlPlaneServiceNamespace

	// loadBalancerClass is the external Service's spec.loadBalancerClass.
	// A Service with a class other than theirs is left alone by MetalLB
	// (0.13 and later), kube-vip and the cloud-provider service
	// controller. Without it, MetalLB's controller finds the EIP in none
	// of its pools and clears the status this package writes, which
	// kube-proxy needs to route the EIP.
	loadBalancerClass = "metal.equinix.com/control-plane-eip"
	// classFieldManager co-owns spec.loadBalancerClass. The field cannot be
	// removed from a Service, and upstream's CCM applies the Service under
	// this CCM's own field manager without it: with a second owner, such
	// an apply (after a rollback) leaves the class in place instead of
	// failing.
	classFieldManager = managedBy + "-class"

	// metalLBAddressPoolAnnotation with metalLBDisabledPool keeps MetalLB
	// from allocating or announcing anything for the external Service
	// (upstream's way, still what MetalLB 0.12 and older, which know no
	// classes, go by).
	metalLBAddressPoolAnnotation = "metallb.universe.tf/address-pool"
	metalLBDisabledPool          = "disabled-metallb-do-not-use-any-address-pool"

	// managedByLabel marks the mirrored EndpointSlices as ours, so the
	// EndpointSlice controllers leave them alone and pruning finds them.
	managedByLabel = discoveryv1.LabelManagedBy
	managedBy      = "cloud-provider-equinix-metal"

	kubernetesNamespace = "default"
	kubernetesName      = "kubernetes"
)

// apiServerTargetPort is the port the kube-apiservers listen on, from the
// default/kubernetes Service: its first port's targetPort. A named or empty
// targetPort falls back to the matching EndpointSlice port, then to port.
func apiServerTargetPort(svc *v1.Service, slices []*discoveryv1.EndpointSlice) (int, error) {
	if svc == nil {
		return 0, fmt.Errorf("the Service default/kubernetes does not exist; the kube-apiserver creates it, so check that the CCM talks to a kube-apiserver")
	}
	if len(svc.Spec.Ports) == 0 {
		return 0, fmt.Errorf("the Service default/kubernetes has no ports")
	}
	p := svc.Spec.Ports[0]
	if p.TargetPort.IntValue() > 0 {
		return p.TargetPort.IntValue(), nil
	}
	for _, s := range slices {
		for _, sp := range s.Ports {
			if sp.Port != nil && *sp.Port > 0 && (sp.Name == nil || *sp.Name == p.Name) {
				return int(*sp.Port), nil
			}
		}
	}
	return int(p.Port), nil
}

// externalService is the desired external Service: type LoadBalancer of
// this CCM's class with the EIP as loadBalancerIP, the ports of
// default/kubernetes with port replaced by apiServerPort (or, when 0, the
// apiserver's targetPort, as upstream did), and MetalLB told to stay away.
func externalService(eip string, src *v1.Service, targetPort, apiServerPort int) *corev1ac.ServiceApplyConfiguration {
	port := apiServerPort
	if port == 0 {
		port = targetPort
	}
	spec := corev1ac.ServiceSpec().
		WithType(v1.ServiceTypeLoadBalancer).
		WithLoadBalancerClass(loadBalancerClass).
		WithLoadBalancerIP(eip)
	// Only the first port: the apiserver serves on one port, and
	// apiServerPort can override only one.
	if len(src.Spec.Ports) > 0 {
		p := src.Spec.Ports[0]
		sp := corev1ac.ServicePort().
			WithName(p.Name).
			WithProtocol(protocolOr(p.Protocol)).
			WithPort(int32(port)).
			WithTargetPort(intstr.FromInt32(int32(targetPort)))
		if p.AppProtocol != nil {
			sp.WithAppProtocol(*p.AppProtocol)
		}
		spec.WithPorts(sp)
	}
	return corev1ac.Service(externalServiceName, externalServiceNamespace).
		WithLabels(map[string]string{managedByLabel: managedBy}).
		WithAnnotations(map[string]string{metalLBAddressPoolAnnotation: metalLBDisabledPool}).
		WithSpec(spec)
}

// externalServiceStatus is the status half: the EIP as the ingress IP.
// kube-proxy reads it to route the EIP to the Service's endpoints.
func externalServiceStatus(eip string) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(externalServiceName, externalServiceNamespace).
		WithStatus(corev1ac.ServiceStatus().
			WithLoadBalancer(corev1ac.LoadBalancerStatus().
				WithIngress(corev1ac.LoadBalancerIngress().WithIP(eip))))
}

// mirrorSliceName names the mirror of one default/kubernetes EndpointSlice.
// The apiserver keeps a single slice named "kubernetes"; its mirror gets
// the external Service's own name, as upstream's did.
func mirrorSliceName(src string) string {
	if src == kubernetesName {
		return externalServiceName
	}
	name := externalServiceName + "-" + src
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.TrimRight(name, "-.")
}

// isKubernetesSlice reports whether an EndpointSlice belongs to the
// default/kubernetes Service. Both the namespace and the owning Service
// must match; upstream's filter joined them with "and not" and so mirrored
// every slice of the default namespace.
func isKubernetesSlice(s *discoveryv1.EndpointSlice) bool {
	return s.Namespace == kubernetesNamespace && s.Labels[discoveryv1.LabelServiceName] == kubernetesName
}

// mirrorSlices builds the external Service's EndpointSlices from the
// default/kubernetes ones: same address type, endpoints and ports, owned
// by the external Service (uid) so they go when it goes. Slices of other
// Services are ignored. The result is sorted by name.
func mirrorSlices(src []*discoveryv1.EndpointSlice, owner types.UID) []*discoveryv1ac.EndpointSliceApplyConfiguration {
	var out []*discoveryv1ac.EndpointSliceApplyConfiguration
	for _, s := range src {
		if !isKubernetesSlice(s) {
			continue
		}
		m := discoveryv1ac.EndpointSlice(mirrorSliceName(s.Name), externalServiceNamespace).
			WithLabels(map[string]string{
				discoveryv1.LabelServiceName: externalServiceName,
				managedByLabel:               managedBy,
			}).
			WithAddressType(s.AddressType)
		if owner != "" {
			m.WithOwnerReferences(metav1ac.OwnerReference().
				WithAPIVersion("v1").WithKind("Service").
				WithName(externalServiceName).WithUID(owner))
		}
		for _, e := range s.Endpoints {
			ep := discoveryv1ac.Endpoint().WithAddresses(e.Addresses...)
			c := discoveryv1ac.EndpointConditions()
			if e.Conditions.Ready != nil {
				c.WithReady(*e.Conditions.Ready)
			}
			if e.Conditions.Serving != nil {
				c.WithServing(*e.Conditions.Serving)
			}
			if e.Conditions.Terminating != nil {
				c.WithTerminating(*e.Conditions.Terminating)
			}
			ep.WithConditions(c)
			if e.NodeName != nil {
				ep.WithNodeName(*e.NodeName)
			}
			if e.Hostname != nil {
				ep.WithHostname(*e.Hostname)
			}
			if e.Zone != nil {
				ep.WithZone(*e.Zone)
			}
			m.WithEndpoints(ep)
		}
		for _, p := range s.Ports {
			ap := discoveryv1ac.EndpointPort()
			if p.Name != nil {
				ap.WithName(*p.Name)
			}
			if p.Protocol != nil {
				ap.WithProtocol(*p.Protocol)
			}
			if p.Port != nil {
				ap.WithPort(*p.Port)
			}
			if p.AppProtocol != nil {
				ap.WithAppProtocol(*p.AppProtocol)
			}
			m.WithPorts(ap)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *discoveryv1ac.EndpointSliceApplyConfiguration) int {
		return strings.Compare(*a.Name, *b.Name)
	})
	return out
}

func protocolOr(p v1.Protocol) v1.Protocol {
	if p == "" {
		return v1.ProtocolTCP
	}
	return p
}

// classOnly is what classFieldManager applies: the class alone.
func classOnly() *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(externalServiceName, externalServiceNamespace).
		WithSpec(corev1ac.ServiceSpec().WithType(v1.ServiceTypeLoadBalancer).WithLoadBalancerClass(loadBalancerClass))
}

// needsRecreate reports why an existing external Service must be deleted
// and created again ("" when it need not): spec.loadBalancerClass of a
// LoadBalancer Service cannot be set or changed in place, and one written
// by upstream or by an earlier version of this CCM has none.
func needsRecreate(svc *v1.Service) string {
	if svc == nil || svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return ""
	}
	if c := svc.Spec.LoadBalancerClass; c == nil || *c != loadBalancerClass {
		was := "none"
		if c != nil {
			was = *c
		}
		return fmt.Sprintf("its spec.loadBalancerClass is %s, want %s, and the field cannot be changed on an existing Service", was, loadBalancerClass)
	}
	return ""
}
