// Package bgp enables BGP on the Equinix Metal project and on the devices of
// the nodes that BGP selection picks, and publishes each node's peer data:
// as node annotations (for kube-vip and anything else that reads them) and
// as the node list handed to the load-balancer module. The node data is
// host/lbsnapshot's plain model (lbsnapshot.Node, Peer, Templates), which
// this package fills and the module's input is built from.
//
// Per-node data is fetched once per node and refreshed on a period, never
// per Service: upstream made two API calls per node for every Service on
// every sync, which grew as Services × nodes.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package bgp
