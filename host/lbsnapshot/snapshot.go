// Package lbsnapshot builds the load-balancer module's input, the
// sdk.GenerateRequest, from a plain description of the cluster: the
// Services, the BGP nodes with their peers, and the configuration that
// shapes the request.
//
// Build is a pure function of its Input, so the module's input is tested
// with golden files (go test -update rewrites them) and an unchanged
// cluster always gives byte-identical request bytes, which is what lets the
// host skip a generate call whose input did not change. Reading the
// informers and the BGP controller into an Input is the caller's (thin) job.
package lbsnapshot

import (
	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/controlplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Input is everything the module's input depends on.
type Input struct {
	// LB is the parsed loadbalancer setting; the module's options come
	// from it (lbmodule.ModuleOptions), as they do for its describe call.
	LB config.LoadBalancer
	// Templates name the BGP peer annotations the module is told about.
	Templates bgp.Templates
	// Services are all the cluster's Services, in any order; Build keeps
	// those this provider load-balances.
	Services []*v1.Service
	// Nodes are the BGP nodes (those node selection picked) whose peer data
	// is known, in any order.
	Nodes []bgp.Node
}

// Build is the module's input: every load-balanced Service that has an
// address and every BGP node with its peers, sorted throughout.
func Build(in Input) sdk.GenerateRequest {
	req := sdk.GenerateRequest{
		APIVersion: sdk.APIVersion, Kind: sdk.KindGenerateRequest,
		Options:  lbmodule.ModuleOptions(in.LB),
		Services: []sdk.Service{}, Nodes: []sdk.Node{},
		Annotations: in.Templates.SDK(),
	}
	for _, s := range in.Services {
		if !ourLoadBalancer(s) {
			continue
		}
		if out, ok := lbmodule.ServiceFromK8s(s); ok {
			req.Services = append(req.Services, out)
		}
	}
	for _, n := range in.Nodes {
		req.Nodes = append(req.Nodes, n.SDK())
	}
	lbmodule.SortSnapshot(&req)
	return req
}

// ourLoadBalancer: a Service the service controller hands this provider.
// A Service with a loadBalancerClass belongs to another load balancer, and
// the control-plane Service has its own EIP: neither may reach a module.
func ourLoadBalancer(s *v1.Service) bool {
	return s.Spec.Type == v1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil &&
		!controlplane.IsControlPlaneService(s.Namespace, s.Name)
}
