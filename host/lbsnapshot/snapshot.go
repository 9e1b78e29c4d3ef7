// Package lbsnapshot is the pure compile step of the load-balancer module's
// input: it turns a plain description of the cluster (the Services, the BGP
// nodes with their peers, and the configuration that shapes the request)
// into the sdk.GenerateRequest, and holds every pure part of that: the
// module's options (ModuleOptions, also for its describe call), a Service's
// view for the module (ServiceFromK8s), which Services reach the module,
// and the order (SortSnapshot).
//
// It is also the pure floor under the loops that do I/O: the Service rules
// that the Elastic IP code, the service controller's answers and the
// module's input share (WantsLoadBalancer, SharingKey, and
// IsControlPlaneService with the name of host/controlplane's Service:
// rules.go), and the BGP node model that host/bgp fills and Build reads
// (Node, Peer, Templates: node.go). host/eip, host/bgp and
// host/controlplane import it, never the other way round, as MetalLB's
// controllers import its pure config compile; a layout test
// (cmd/cloud-provider-equinix-metal, TestPureFloor) keeps it so.
//
// Build is a pure function of its Input, so the module's input is tested
// with golden files (go test -update rewrites them) and an unchanged
// cluster always gives byte-identical request bytes, which is what lets the
// host skip a generate call whose input did not change. Reading the
// informers and the BGP controller into an Input is the caller's (thin) job;
// nothing here reads or writes anything.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package lbsnapshot

import (
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Input is everything the module's input depends on.
type Input struct {
	// LB is the parsed loadbalancer setting; the module's options come
	// from it (ModuleOptions), as they do for its describe call.
	LB config.LoadBalancer
	// Templates name the BGP peer annotations the module is told about.
	Templates Templates
	// Services are all the cluster's Services, in any order; Build keeps
	// those this provider load-balances.
	Services []*v1.Service
	// Nodes are the BGP nodes (those node selection picked) whose peer data
	// is known, in any order.
	Nodes []Node
	// OwnAddressServed reports whether the CCM serves a Service's own
	// spec.loadBalancerIP: the project holds it, in the metro or facility
	// the Service is placed in (eip.Manager.ServesOwnAddress, from a
	// cache: no call per snapshot). Such an address enters the module's
	// view before it is in the status: MetalLB, say, allocates it only
	// from a pool the module wrote, and clears a status it cannot
	// allocate. nil serves none: a user's address counts only once in the
	// status.
	OwnAddressServed func(svc *v1.Service, ip string) bool
	// Staged are the addresses the CCM reserved for a Service and is
	// about to write into it (eip.Manager.SetBeforePublish). They enter
	// the module's view of a Service that shows none yet, so that what
	// the module writes for them (MetalLB's pool) is there before the
	// Service asks for them. nil stages none.
	Staged func(svc *v1.Service) []string
	// Locate says where the project's Elastic IP reservation holding ip
	// is (from the reservation cache: no call per snapshot); ok is false
	// when none is known. It fills sdk.Service.Locations, by which a
	// module announces an address only from the nodes of its metro. nil
	// locates nothing.
	Locate func(ip string) (loc sdk.AddressLocation, ok bool)
}

// Build is the module's input: every load-balanced Service that has an
// address (IPv4 and, for a dual-stack Service, IPv6) and every BGP node
// with its peers of both families, sorted throughout.
func Build(in Input) sdk.GenerateRequest {
	req := sdk.GenerateRequest{
		APIVersion: sdk.APIVersion, Kind: sdk.KindGenerateRequest,
		Options:  ModuleOptions(in.LB),
		Services: []sdk.Service{}, Nodes: []sdk.Node{},
		Annotations: in.Templates.SDK(),
	}
	for _, s := range in.Services {
		if !ourLoadBalancer(s) {
			continue
		}
		out, ok := ServiceFromK8s(s)
		if own := s.Spec.LoadBalancerIP; !ok && own != "" && in.OwnAddressServed != nil && in.OwnAddressServed(s, own) { //nolint:staticcheck // the user's own address
			out, ok = serviceFromK8s(s, own)
		}
		if !ok && in.Staged != nil {
			out, ok = serviceFromK8s(s, in.Staged(s)...)
		}
		if ok {
			out.Locations = locations(out.IPs, in.Locate)
			req.Services = append(req.Services, out)
		}
	}
	for _, n := range in.Nodes {
		req.Nodes = append(req.Nodes, sdkNode(n))
	}
	SortSnapshot(&req)
	return req
}

// sdkNode is the module's view of a BGP node: its IPv4 peers as the BGP
// controller gives them (sorted by IP there), then its IPv6 peers sorted
// by IP (compared as strings, as the controller sorts the IPv4 ones), and
// the source address of each family. A module of ABI version 4 or older
// gets it without the IPv6 part (sdk/wasmhost).
func sdkNode(n Node) sdk.Node {
	out := n.SDK()
	out.SourceIPv6 = n.SourceIPv6
	if len(n.PeersV6) == 0 {
		return out
	}
	v6 := make([]sdk.Peer, 0, len(n.PeersV6))
	for _, p := range n.PeersV6 {
		v6 = append(v6, p.SDK())
	}
	sort.SliceStable(v6, func(i, j int) bool { return v6[i].IP < v6[j].IP })
	out.Peers = append(out.Peers, v6...)
	return out
}

// locations are where ips (sorted) are reserved, in their order, for those
// locate knows; nil when it knows none.
func locations(ips []string, locate func(string) (sdk.AddressLocation, bool)) []sdk.AddressLocation {
	if locate == nil {
		return nil
	}
	var out []sdk.AddressLocation
	for _, ip := range ips {
		if l, ok := locate(ip); ok && (l.Metro != "" || l.Facility != "") {
			l.IP = ip
			out = append(out, l)
		}
	}
	return out
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
