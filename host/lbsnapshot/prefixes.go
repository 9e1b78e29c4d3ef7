package lbsnapshot

import (
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// AnnouncedPerNode counts, for each BGP node of req, the distinct Service
// addresses its BGP session carries: an Elastic IP whose location the
// request gives only where Equinix Metal routes it (routes), an address of
// no known location from every node. This is what each session holds
// against the project's prefix limit; in a cluster across metros a node
// carries its own metro's addresses, not the cluster's.
func AnnouncedPerNode(req sdk.GenerateRequest) map[string]int {
	where := map[string]sdk.AddressLocation{} // a located address
	everywhere := map[string]bool{}           // the others
	for _, s := range req.Services {
		for _, ip := range s.IPs {
			everywhere[ip] = true
		}
		for _, l := range s.Locations {
			where[l.IP] = sdk.AddressLocation{Metro: l.Metro, Facility: l.Facility}
		}
	}
	// Few locations, many addresses: count per location once, so a
	// snapshot of 10,000 addresses and 1,000 nodes stays cheap.
	perLocation := map[sdk.AddressLocation]int{}
	for ip, l := range where {
		delete(everywhere, ip)
		perLocation[l]++
	}
	out := make(map[string]int, len(req.Nodes))
	for _, n := range req.Nodes {
		c := len(everywhere)
		for l, k := range perLocation {
			if routes(l, n.Labels) {
				c += k
			}
		}
		out[n.Name] = c
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
