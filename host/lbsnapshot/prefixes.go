package lbsnapshot

import (
	"slices"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// announced is what one BGP node's sessions carry against the project's
// prefix limit: the distinct Service addresses of each family. Equinix
// Metal's limit (max_prefix) is per BGP session, and a node's IPv4 and
// IPv6 sessions are separate (each carries its own family), so each
// family counts against the limit on its own.
type announced struct {
	IPv4, IPv6 int
}

// MostPerSession is the count of the node's fuller session: what the
// limit is checked against.
func (a announced) MostPerSession() int { return max(a.IPv4, a.IPv6) }

// AnnouncedPerNode counts, for each BGP node of req, the distinct Service
// addresses its fuller BGP session carries (announcedPerFamily's
// MostPerSession): an IPv4-only cluster's count is the node's IPv4
// addresses, as it always was.
func AnnouncedPerNode(req sdk.GenerateRequest) map[string]int {
	per := announcedPerFamily(req)
	out := make(map[string]int, len(per))
	for n, a := range per {
		out[n] = a.MostPerSession()
	}
	return out
}

// announcedPerFamily counts, for each BGP node of req and each address
// family, the distinct Service addresses its session of that family
// carries: an Elastic IP whose location the request gives only where
// Equinix Metal routes it (routes), an address of no known location from
// every node. An IPv4 address counts on every BGP node, as it always did;
// an IPv6 address only on a node with an IPv6 peer (a node without has no
// IPv6 session to carry it). This is what each session holds against the
// project's prefix limit; in a cluster across metros a node carries its
// own metro's addresses, not the cluster's.
func announcedPerFamily(req sdk.GenerateRequest) map[string]announced {
	// Index 0 is IPv4, 1 IPv6.
	family := func(ip string) int {
		if sdk.IsIPv6(ip) {
			return 1
		}
		return 0
	}
	where := map[string]sdk.AddressLocation{} // a located address
	var everywhere [2]map[string]bool         // the others
	everywhere[0], everywhere[1] = map[string]bool{}, map[string]bool{}
	for _, s := range req.Services {
		for _, ip := range s.IPs {
			everywhere[family(ip)][ip] = true
		}
		for _, l := range s.Locations {
			where[l.IP] = sdk.AddressLocation{Metro: l.Metro, Facility: l.Facility}
		}
	}
	// Few locations, many addresses: count per location once, so a
	// snapshot of 10,000 addresses and 1,000 nodes stays cheap.
	var perLocation [2]map[sdk.AddressLocation]int
	perLocation[0], perLocation[1] = map[sdk.AddressLocation]int{}, map[sdk.AddressLocation]int{}
	for ip, l := range where {
		f := family(ip)
		delete(everywhere[f], ip)
		perLocation[f][l]++
	}
	out := make(map[string]announced, len(req.Nodes))
	for _, n := range req.Nodes {
		var c [2]int
		for f := range c {
			if f == 1 && !slices.ContainsFunc(n.Peers, func(p sdk.Peer) bool { return sdk.IsIPv6(p.IP) }) {
				continue
			}
			c[f] = len(everywhere[f])
			for l, k := range perLocation[f] {
				if routes(l, n.Labels) {
					c[f] += k
				}
			}
		}
		out[n.Name] = announced{IPv4: c[0], IPv6: c[1]}
	}
	return out
}

// routes reports whether Equinix Metal routes an Elastic IP reserved at l
// to a node with these labels: a metro's reservation in its metro
// (sdk.MetroLabel), a facility's in its facility (sdk.FacilityLabel) and,
// on a node without a facility label (as upstream v3.8.1 left them), in
// its metro, as the MetalLB module selects the nodes that announce it.
func routes(l sdk.AddressLocation, labels map[string]string) bool {
	if l.Facility != "" {
		zone, zoned := labels[sdk.FacilityLabel]
		return zone == l.Facility || (!zoned && l.Metro != "" && labels[sdk.MetroLabel] == l.Metro)
	}
	return labels[sdk.MetroLabel] == l.Metro
}
