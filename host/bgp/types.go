// Package bgp enables BGP on the Equinix Metal project and on the devices of
// the nodes that BGP selection picks, and publishes each node's peer data:
// as node annotations (for kube-vip and anything else that reads them) and
// as the node list handed to the load-balancer module.
//
// Per-node data is fetched once per node and refreshed on a period, never
// per Service: upstream made two API calls per node for every Service on
// every sync, which grew as Services × nodes.
package bgp

import "github.com/metal-ccm/cloud-provider-equinix-metal/host/config"

// Peer is one BGP neighbour of a device (an Equinix router).
type Peer struct {
	ASN      uint32
	IP       string
	Password config.Secret
	// Multihop is the neighbour data's multihop: the peer is behind the
	// node's gateway (Equinix says so of every neighbour).
	Multihop bool
}

// Node is a BGP-selected node with everything a load balancer needs to peer
// from it.
type Node struct {
	Name     string
	Labels   map[string]string
	DeviceID string
	LocalASN uint32
	// SourceIP is the device's private IPv4: the routers drop sessions from
	// the public address.
	SourceIP       string
	PrivateNetwork string
	Peers          []Peer
	// SourceIPv6 is the device's public IPv6, the source of its IPv6 sessions
	// ("" when the device has no IPv6 session).
	SourceIPv6 string
	// PeersV6 are the device's IPv6 neighbours (Equinix's fc00::e, fc00::f),
	// empty until a Service needs IPv6.
	PeersV6 []Peer
}
