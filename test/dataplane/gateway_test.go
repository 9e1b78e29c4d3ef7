package dataplane

import (
	"slices"
	"strings"
	"testing"
)

// TestGatewayLinks: the peer addresses live only in the routers'
// namespace, and the nodes reach each of them through the gateway, never
// directly: that is what keeps a TTL-1 session from coming up.
func TestGatewayLinks(t *testing.T) {
	const gw, rt = "/proc/1/ns/net", "/proc/2/ns/net"
	cmds := gatewayLinks(gw, rt, 1, 2)
	for _, peer := range append(slices.Clone(RouterAddrs), RouterAddrs6...) {
		var onLo, nodeRoute, gwRoute []string
		for _, c := range cmds {
			line := strings.Join(c, " ")
			switch {
			case slices.Contains(c, "addr") && slices.ContainsFunc(c, func(a string) bool { return strings.HasPrefix(a, peer+"/") }):
				onLo = append(onLo, line)
			case slices.Contains(c, "route") && slices.ContainsFunc(c, func(a string) bool { return strings.HasPrefix(a, peer+"/") }):
				if c[0] == gw {
					gwRoute = append(gwRoute, line)
				} else if !strings.HasPrefix(c[0], "/proc/") {
					nodeRoute = append(nodeRoute, line)
				}
			}
		}
		if len(onLo) != 1 || !strings.HasPrefix(onLo[0], rt+" ") || !strings.HasSuffix(strings.TrimSuffix(onLo[0], " nodad"), "dev lo") {
			t.Errorf("%s: addresses %q, want one, on the routers' loopback", peer, onLo)
		}
		gateway := "via 10.254.0.2"
		if strings.Contains(peer, ":") {
			gateway = "via fd00:254::2"
		}
		if len(nodeRoute) != 1 || !strings.HasSuffix(nodeRoute[0], gateway) {
			t.Errorf("%s: the nodes' routes %q, want one %s", peer, nodeRoute, gateway)
		}
		if len(gwRoute) != 1 {
			t.Errorf("%s: the gateway's routes %q, want one towards the routers", peer, gwRoute)
		}
	}
}
