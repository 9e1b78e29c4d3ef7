package provider

import (
	"net/netip"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/controlplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// sharingAnnotations name a Service's IP-sharing key, newest first.
var sharingAnnotations = []string{"metallb.io/allow-shared-ip", "metallb.universe.tf/allow-shared-ip"}

// moduleOptions are the load-balancer module's settings from the URL.
func moduleOptions(lb config.LoadBalancer) sdk.Options {
	return sdk.Options{Namespace: lb.Namespace, ConfigMap: lb.ConfigMap, Params: lb.Options}
}

// buildRequest is the module's input: every load-balanced Service that has
// an address and every BGP node with its peers. It is a pure function of
// its arguments, sorted throughout, so an unchanged cluster gives a
// byte-identical request.
func buildRequest(opts sdk.Options, services []*v1.Service, nodes []bgp.Node, t bgp.Templates) sdk.GenerateRequest {
	req := sdk.GenerateRequest{
		APIVersion: sdk.APIVersion, Kind: sdk.KindGenerateRequest, Options: opts,
		Services: []sdk.Service{}, Nodes: []sdk.Node{},
		Annotations: t.SDK(),
	}
	for _, s := range services {
		if !ourLoadBalancer(s) {
			continue
		}
		ips := serviceIPs(s)
		if len(ips) == 0 {
			continue
		}
		out := sdk.Service{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID), IPs: ips, Annotations: s.Annotations}
		for _, p := range s.Spec.Ports {
			out.Ports = append(out.Ports, sdk.Port{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port})
		}
		for _, a := range sharingAnnotations {
			if k := s.Annotations[a]; k != "" {
				out.SharingKey = k
				break
			}
		}
		req.Services = append(req.Services, out)
	}
	sort.Slice(req.Services, func(i, j int) bool {
		a, b := req.Services[i], req.Services[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	for _, n := range nodes {
		req.Nodes = append(req.Nodes, n.SDK())
	}
	sort.Slice(req.Nodes, func(i, j int) bool { return req.Nodes[i].Name < req.Nodes[j].Name })
	return req
}

// ourLoadBalancer: a Service the service controller hands this provider.
// The control-plane Service has its own EIP and must never reach a module.
func ourLoadBalancer(s *v1.Service) bool {
	return s.Spec.Type == v1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil &&
		!controlplane.IsControlPlaneService(s.Namespace, s.Name)
}

// serviceIPs are the addresses in the Service's status, sorted and unique.
func serviceIPs(s *v1.Service) []string {
	seen := map[string]bool{}
	var ips []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		a, err := netip.ParseAddr(in.IP)
		if err != nil || seen[a.String()] {
			continue
		}
		seen[a.String()] = true
		ips = append(ips, a.String())
	}
	sort.Strings(ips)
	return ips
}
