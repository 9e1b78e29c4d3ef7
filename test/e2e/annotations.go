package e2e

import (
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"

	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The CCM's default BGP node annotations ({{n}} = the peer's index), which
// kube-vip reads.
const (
	annLocalASN = "metal.equinix.com/bgp-peers-%d-node-asn"
	annPeerASN  = "metal.equinix.com/bgp-peers-%d-peer-asn"
	annPeerIP   = "metal.equinix.com/bgp-peers-%d-peer-ip"
	annSrcIP    = "metal.equinix.com/bgp-peers-%d-src-ip"
	annPass     = "metal.equinix.com/bgp-peers-%d-bgp-pass"
	annMultiHop = "metal.equinix.com/bgp-peers-%d-peer-multi-hop"
)

// StartAnnotationSpeaker is a kube-vip-style speaker for one node: a GoBGP
// instance configured from nothing but the node's BGP annotations (local
// ASN, peers, source address, password, multihop), as kube-vip configures its own
// embedded GoBGP. It does not listen; it dials each peer from the source
// address. Announce a Service's address with dataplane.Router.Announce.
func StartAnnotationSpeaker(bins dataplane.Binaries, dir string, node *v1.Node, apiPort int) (*dataplane.Router, error) {
	a := node.Annotations
	var b strings.Builder
	var local, src string
	for i := 0; a[fmt.Sprintf(annPeerIP, i)] != ""; i++ {
		l, s := a[fmt.Sprintf(annLocalASN, i)], a[fmt.Sprintf(annSrcIP, i)]
		if local == "" {
			local, src = l, s
			if _, err := strconv.ParseUint(local, 10, 32); err != nil {
				return nil, fmt.Errorf("node %s: annotation %s = %q is not an ASN", node.Name, fmt.Sprintf(annLocalASN, i), local)
			}
			fmt.Fprintf(&b, "[global.config]\n  as = %s\n  router-id = %q\n  port = -1\n", local, src)
		}
		fmt.Fprintf(&b, "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %s\n", a[fmt.Sprintf(annPeerIP, i)], a[fmt.Sprintf(annPeerASN, i)])
		// The password annotation is base64, as upstream writes it and
		// kube-vip decodes it.
		pass, err := base64.StdEncoding.DecodeString(a[fmt.Sprintf(annPass, i)])
		if err != nil {
			return nil, fmt.Errorf("node %s: annotation %s is not base64: %v", node.Name, fmt.Sprintf(annPass, i), err)
		}
		if len(pass) > 0 {
			fmt.Fprintf(&b, "    auth-password = %q\n", pass)
		}
		// kube-vip v1.2 (pkg/bgp/peers.go) sets GoBGP's eBGP multihop, TTL
		// 50, from peer-multi-hop; without it GoBGP dials eBGP at TTL 1,
		// which the gateway in front of the routers drops.
		if a[fmt.Sprintf(annMultiHop, i)] == "true" {
			b.WriteString("  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = 50\n")
		}
		fmt.Fprintf(&b, "  [neighbors.transport.config]\n    local-address = %q\n", s)
	}
	if local == "" {
		return nil, fmt.Errorf("node %s has no BGP annotations", node.Name)
	}
	return dataplane.StartGoBGP(bins, dir, dataplane.RouterOptions{Name: "kube-vip-style-" + node.Name, APIPort: apiPort}, b.String())
}
