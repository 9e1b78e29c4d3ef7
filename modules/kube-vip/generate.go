package main

import (
	"fmt"
	"slices"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Module is the kube-vip built-in. It emits nothing: the CCM core writes the BGP
// node annotations (the {{n}} templates and network-4-private) for every
// load-balancer mode, and kube-vip reads them.
//
// IPv4 only: the node annotations carry a node's IPv4 sessions alone
// (sdk.RenderBGPAnnotations leaves IPv6 peers out), and kube-vip takes one
// source address from them (index 0's) for every peer IP it finds under
// any index, so it can open no IPv6 session with Equinix's routers and
// Equinix gets no route for a Service's IPv6 address. The module says so
// in one warning when a Service has one.
var Module = sdk.Module{Name: "kube-vip", Version: "1.0.0", Describe: describe, Generate: generate}

func describe(sdk.Options) (sdk.Description, error) { return sdk.Description{}, nil }

func generate(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	var resp sdk.GenerateResponse
	var v6 []string
	for _, s := range req.Services {
		if slices.ContainsFunc(s.IPs, sdk.IsIPv6) {
			v6 = append(v6, s.Namespace+"/"+s.Name)
		}
	}
	if len(v6) > 0 {
		resp.Warnings = []string{fmt.Sprintf("the IPv6 addresses of %d Services (%s, for one) are not announced: kube-vip peers from the CCM's BGP node annotations, which carry IPv4 sessions only; use MetalLB >= 0.13 in FRR mode (metallb:///) to announce them", len(v6), v6[0])}
	}
	return resp, nil
}
