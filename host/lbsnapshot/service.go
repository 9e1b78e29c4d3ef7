package lbsnapshot

import (
	"net/netip"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// ServiceFromK8s turns a Service of type LoadBalancer into the module's view
// of it. Its addresses are the ingress IPs of its status, else
// spec.loadBalancerIP where the CCM wrote it (where upstream records the
// Elastic IP), else the addresses of metallb.io/loadBalancerIPs where the
// CCM wrote it (where it records an IPv6 or dual-stack Service's Elastic
// IPs: spec.loadBalancerIP holds one address); ok is false when it has
// none, and such a Service is left out of the snapshot.
//
// The fallbacks are not only for a status not written yet: MetalLB's
// controller empties the status of a Service whose address is in no pool,
// and the pool is what the module writes from these addresses. Reading
// the status alone, a race lost to MetalLB (it cleared the status before
// the module's sync read it) left the Service without a pool for good:
// met by a dual-stack Service in the real cluster (test/cluster).
//
// A spec.loadBalancerIP the user wrote counts only once it is in the
// status, that is once host/eip has accepted it as an Elastic IP of the
// project: a module announcing it before (or after a refusal: an address
// the CCM released, brought back by a restored Service) would have the
// nodes announce an address the project may not hold, and MetalLB would
// put it in the status itself.
func ServiceFromK8s(svc *corev1.Service) (s sdk.Service, ok bool) {
	return serviceFromK8s(svc)
}

// serviceFromK8s is ServiceFromK8s with own, when not empty, as the
// addresses of a Service that shows none: the user's own
// spec.loadBalancerIP once the caller knows the CCM serves it (Build's
// OwnAddressServed), or the addresses the CCM is about to write (Build's
// Staged).
func serviceFromK8s(svc *corev1.Service, own ...string) (s sdk.Service, ok bool) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return sdk.Service{}, false
	}
	seen := map[string]bool{}
	// A zoned address (fe80::1%eth0) parses, but is no Elastic IP and
	// not the plain address sdk.Service.IPs promises modules.
	add := func(ip string) {
		if a, err := netip.ParseAddr(ip); err == nil && a.Zone() == "" && !seen[a.String()] {
			seen[a.String()] = true
			s.IPs = append(s.IPs, a.String())
		}
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		add(in.IP)
	}
	if len(s.IPs) == 0 && fieldmanager.WroteLoadBalancerIP(svc.ManagedFields) {
		add(svc.Spec.LoadBalancerIP) //nolint:staticcheck // upstream's field for the EIP
	}
	if len(s.IPs) == 0 && fieldmanager.WroteAnnotation(svc.ManagedFields, fieldmanager.AnnotationLoadBalancerIPs) {
		for _, ip := range strings.Split(svc.Annotations[fieldmanager.AnnotationLoadBalancerIPs], ",") {
			add(strings.TrimSpace(ip))
		}
	}
	if len(s.IPs) == 0 {
		for _, ip := range own {
			add(ip)
		}
	}
	if len(s.IPs) == 0 {
		return sdk.Service{}, false
	}
	sortIPs(s.IPs)
	s.Namespace, s.Name, s.UID = svc.Namespace, svc.Name, string(svc.UID)
	for _, p := range svc.Spec.Ports {
		s.Ports = append(s.Ports, sdk.Port{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port})
	}
	if len(svc.Annotations) > 0 {
		s.Annotations = make(map[string]string, len(svc.Annotations))
		for k, v := range svc.Annotations {
			s.Annotations[k] = v
		}
	}
	s.SharingKey = SharingKey(svc)
	return s, true
}

// sortIPs sorts a Service's addresses (each valid, in netip's form): IPv4
// before IPv6, each family in string order, which for IPv4 is the order
// they always had, so an IPv4-only Service's request bytes do not change.
// The order is stable whatever the order of the status, which Kubernetes
// does not fix.
func sortIPs(ips []string) {
	sort.Slice(ips, func(i, j int) bool {
		if a, b := sdk.IsIPv6(ips[i]), sdk.IsIPv6(ips[j]); a != b {
			return b
		}
		return ips[i] < ips[j]
	})
}

// ViewChanged reports whether an update of a Service changes what the
// load-balancer module's loop reads of it: the Service in the module's
// input (ServiceFromK8s, and spec.loadBalancerIP, from which Build also
// takes a user's own address), and its traffic policy (the check that a
// Local Service has an announcing node, lbmodule.Announcements). The
// other updates of a new Service (the finalizer, its status as the CCM
// and MetalLB write it, kube-proxy's and the scheduler's doings) would
// each ask for a module sync that changes nothing: a burst's Services,
// updated several times each, kept syncs going back to back.
func ViewChanged(old, cur *corev1.Service) bool {
	if ourLoadBalancer(old) != ourLoadBalancer(cur) {
		return true
	}
	if !ourLoadBalancer(cur) {
		return false
	}
	if old.UID != cur.UID || old.Spec.LoadBalancerIP != cur.Spec.LoadBalancerIP || //nolint:staticcheck // Build reads it
		old.Spec.ExternalTrafficPolicy != cur.Spec.ExternalTrafficPolicy {
		return true
	}
	a, aok := ServiceFromK8s(old)
	b, bok := ServiceFromK8s(cur)
	return aok != bok || !reflect.DeepEqual(a, b)
}
