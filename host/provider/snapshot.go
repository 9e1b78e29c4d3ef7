package provider

import (
	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/controlplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

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
		if out, ok := lbmodule.ServiceFromK8s(s); ok {
			req.Services = append(req.Services, out)
		}
	}
	for _, n := range nodes {
		req.Nodes = append(req.Nodes, n.SDK())
	}
	lbmodule.SortSnapshot(&req)
	return req
}

// ourLoadBalancer: a Service the service controller hands this provider.
// The control-plane Service has its own EIP and must never reach a module.
func ourLoadBalancer(s *v1.Service) bool {
	return s.Spec.Type == v1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil &&
		!controlplane.IsControlPlaneService(s.Namespace, s.Name)
}
