package main

import (
	"fmt"
	"slices"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Module is the kube-vip built-in. It emits no object and no annotation:
// the CCM core writes the BGP node annotations (the {{n}} templates, the
// peer's multihop beside its IP, and network-4-private) for every
// load-balancer mode, and kube-vip reads them. Version 1.1.0 wrote the
// multihop annotation itself, in the module's sync after the core's
// write; kube-vip had by then read the peers without it (it reads a
// node's annotations once) and kept its sessions at TTL 1. What is left
// here is to say, in warnings, which settings kube-vip cannot be given.
//
// IPv4 only: the node annotations carry a node's IPv4 sessions alone
// (sdk.RenderBGPAnnotations leaves IPv6 peers out), and kube-vip takes one
// source address from them (index 0's) for every peer IP it finds under
// any index, so it can open no IPv6 session with Equinix's routers and
// Equinix gets no route for a Service's IPv6 address. The module says so
// in one warning when a Service has one.
var Module = sdk.Module{Name: "kube-vip", Version: "1.2.0", Describe: describe, Generate: generate}

func describe(sdk.Options) (sdk.Description, error) {
	return sdk.Description{}, nil
}

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
	if req.Options.Params["holdTime"] != "" || req.Options.Params["keepaliveTime"] != "" {
		// kube-vip v1.2 reads its BGP settings from node annotations
		// (ASN, address, password, multihop) and its own configuration;
		// no annotation carries a timer.
		resp.Warnings = append(resp.Warnings, "holdTime and keepaliveTime are not written: kube-vip reads no BGP timer from node annotations; set them in kube-vip's own configuration")
	}
	if req.Options.Params["bfdInterval"] != "" {
		resp.Warnings = append(resp.Warnings, "BFD (bfdInterval) is not written: kube-vip reads no BFD setting from node annotations; use MetalLB in FRR mode or with FRR-K8s (metallb:///?bgpType=frr-k8s) for BFD")
	}
	return resp, nil
}
