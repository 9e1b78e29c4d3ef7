// Command wrongasn is a deliberately broken load-balancer module, for the
// data-plane test only: it writes the MetalLB objects a correct module
// would, except that every BGPPeer's peerASN is off by one. Objects that
// look right at a glance, and a data plane that must not come up: the e2e
// test runs its router assertion against it and expects it to fail, which
// shows that the assertion can fail. Build: GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared (make e2e does).
package main

import (
	"fmt"
	"sort"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func init() {
	sdk.Register(sdk.Module{Name: "e2e-wrong-peer-asn", Version: "0.0.1", Describe: describe, Generate: generate})
}

// main is never called: the module is a WASI reactor.
func main() {}

func namespace(o sdk.Options) string {
	if o.Namespace == "" {
		return "metallb-system"
	}
	return o.Namespace
}

func describe(o sdk.Options) (sdk.Description, error) {
	ns := namespace(o)
	return sdk.Description{Emits: []sdk.ObjectKind{
		{APIVersion: "metallb.io/v1beta1", Kind: "IPAddressPool", Namespace: ns},
		{APIVersion: "metallb.io/v1beta2", Kind: "BGPPeer", Namespace: ns},
		{APIVersion: "metallb.io/v1beta1", Kind: "BGPAdvertisement", Namespace: ns},
	}}, nil
}

func generate(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	ns := namespace(req.Options)
	var resp sdk.GenerateResponse
	var pools []any
	for _, s := range req.Services {
		var cidrs []any
		for _, ip := range s.IPs {
			cidrs = append(cidrs, ip+"/32")
		}
		name := s.Namespace + "." + s.Name
		pools = append(pools, name)
		resp.Objects = append(resp.Objects, sdk.Object{"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"addresses": cidrs, "autoAssign": false}})
	}
	if len(pools) == 0 {
		return resp, nil
	}
	nodes := append([]sdk.Node(nil), req.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		host := n.Labels["kubernetes.io/hostname"]
		if host == "" {
			host = n.Name
		}
		for i, p := range n.Peers {
			spec := map[string]any{
				"myASN": n.LocalASN, "peerASN": p.ASN + 1, // the deliberate mistake
				"peerAddress": p.IP, "peerPort": 179, "sourceAddress": n.SourceIP,
				"nodeSelectors": []any{map[string]any{"matchLabels": map[string]any{"kubernetes.io/hostname": host}}},
			}
			if p.Password != "" {
				spec["password"] = string(p.Password)
			}
			resp.Objects = append(resp.Objects, sdk.Object{"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", n.Name, i), "namespace": ns},
				"spec":     spec})
		}
	}
	resp.Objects = append(resp.Objects, sdk.Object{"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
		"metadata": map[string]any{"name": "e2e-adv", "namespace": ns},
		"spec":     map[string]any{"ipAddressPools": pools}})
	return resp, nil
}
