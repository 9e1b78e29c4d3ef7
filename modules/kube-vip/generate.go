package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Module is the kube-vip built-in. It emits no object: the CCM core writes
// the BGP node annotations (the {{n}} templates and network-4-private) for
// every load-balancer mode, and kube-vip reads them. What kube-vip reads
// beyond those, the module writes on each BGP node: peer-multi-hop.
//
// IPv4 only: the node annotations carry a node's IPv4 sessions alone
// (sdk.RenderBGPAnnotations leaves IPv6 peers out), and kube-vip takes one
// source address from them (index 0's) for every peer IP it finds under
// any index, so it can open no IPv6 session with Equinix's routers and
// Equinix gets no route for a Service's IPv6 address. The module says so
// in one warning when a Service has one.
var Module = sdk.Module{Name: "kube-vip", Version: "1.1.0", Describe: describe, Generate: generate}

func describe(sdk.Options) (sdk.Description, error) {
	return sdk.Description{NodeAnnotations: true}, nil
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
	tmpl, ok := multiHopTemplate(req.Annotations)
	if !ok {
		return resp, nil
	}
	for _, n := range req.Nodes {
		if a := multiHop(tmpl, n); len(a) > 0 {
			if resp.NodeAnnotations == nil {
				resp.NodeAnnotations = map[string]map[string]string{}
			}
			resp.NodeAnnotations[n.Name] = a
		}
	}
	return resp, nil
}

// peerIPSuffix and multiHopSuffix end the names kube-vip reads (v1.2,
// pkg/manager/watch_annotations.go): <prefix>/bgp-peers-0-peer-ip and,
// beside it, <prefix>/bgp-peers-0-peer-multi-hop, "true" or "false".
const (
	peerIPSuffix   = "peer-ip"
	multiHopSuffix = "peer-multi-hop"
)

// multiHopTemplate is the name of the multihop annotation beside the peer
// IP template: the same name with peer-multi-hop for peer-ip. A peer IP
// template of another form is not one kube-vip reads, so there is none.
func multiHopTemplate(t sdk.AnnotationTemplates) (string, bool) {
	if !strings.Contains(t.PeerIP, sdk.Placeholder) || !strings.HasSuffix(t.PeerIP, peerIPSuffix) {
		return "", false
	}
	return strings.TrimSuffix(t.PeerIP, peerIPSuffix) + multiHopSuffix, true
}

// multiHop is the node's multihop annotation per IPv4 peer, indexed as
// the core indexes its peer annotations (by peer IP, compared as strings):
// kube-vip dials every peer IP with index 0's settings, and without
// multihop it keeps an eBGP session at TTL 1, which never crosses the
// gateway in front of Equinix's peers.
func multiHop(tmpl string, n sdk.Node) map[string]string {
	var peers []sdk.Peer
	for _, p := range n.Peers {
		if !sdk.IsIPv6(p.IP) {
			peers = append(peers, p)
		}
	}
	slices.SortStableFunc(peers, func(a, b sdk.Peer) int { return strings.Compare(a.IP, b.IP) })
	out := make(map[string]string, len(peers))
	for i, p := range peers {
		out[strings.ReplaceAll(tmpl, sdk.Placeholder, strconv.Itoa(i))] = strconv.FormatBool(p.Multihop)
	}
	return out
}
