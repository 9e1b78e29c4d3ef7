package lbmodule

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// OptionsFromConfig are the module limits the CCM's configuration sets.
func OptionsFromConfig(c *config.Config) wasmhost.Options {
	return wasmhost.Options{CacheDir: c.ModuleCacheDir, MemoryLimitMiB: c.ModuleMemoryLimitMiB, Timeout: c.ModuleTimeout, Logger: KlogLogger()}
}

// ModuleOptions are the module's settings from the loadbalancer URL, the
// same in its describe and every generate request: the one place they are
// made. No parameters is nil, not an empty map.
func ModuleOptions(lb config.LoadBalancer) sdk.Options {
	o := sdk.Options{Namespace: lb.Namespace, ConfigMap: lb.ConfigMap, Params: lb.Options}
	if len(o.Params) == 0 {
		o.Params = nil
	}
	return o
}

// ServiceFromK8s turns a Service of type LoadBalancer into the module's view
// of it. Its addresses are the ingress IPs of its status, else
// spec.loadBalancerIP (where upstream records the Elastic IP); ok is false
// when it has none, and such a Service is left out of the snapshot.
func ServiceFromK8s(svc *corev1.Service) (s sdk.Service, ok bool) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return sdk.Service{}, false
	}
	seen := map[string]bool{}
	add := func(ip string) {
		if a, err := netip.ParseAddr(ip); err == nil && !seen[a.String()] {
			seen[a.String()] = true
			s.IPs = append(s.IPs, a.String())
		}
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		add(in.IP)
	}
	if len(s.IPs) == 0 {
		add(svc.Spec.LoadBalancerIP) //nolint:staticcheck // upstream's field for the EIP
	}
	if len(s.IPs) == 0 {
		return sdk.Service{}, false
	}
	sort.Strings(s.IPs)
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
	s.SharingKey = eip.SharingKey(svc)
	return s, true
}

// SortSnapshot sorts Services by namespace and name and nodes by name, so
// that the same cluster always gives the same request bytes.
func SortSnapshot(req *sdk.GenerateRequest) {
	sort.Slice(req.Services, func(i, j int) bool {
		a, b := req.Services[i], req.Services[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	sort.Slice(req.Nodes, func(i, j int) bool { return req.Nodes[i].Name < req.Nodes[j].Name })
}
