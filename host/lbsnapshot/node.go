package lbsnapshot

import (
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// The BGP node model: what host/bgp reads of a node's device and its
// neighbours, and what it publishes (as node annotations and as the nodes of
// the module's input). It is plain data, here in the pure floor, so the BGP
// loop fills it and Build reads it without one importing the other.

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

// Templates are the node annotation names; {{n}} is the peer's index.
type Templates struct {
	LocalASN, PeerASN, PeerIP, SrcIP, BGPPass string
	// NetworkIPv4Private is a plain name (no index).
	NetworkIPv4Private string
	// OmitBGPPass leaves the password annotations out (annotateBGPPass
	// false). BGPPass still names them, so that a patch removes the ones a
	// node carries from before.
	OmitBGPPass bool
}

// TemplatesFrom takes the names from the configuration.
func TemplatesFrom(c *config.Config) Templates {
	return Templates{
		LocalASN: c.AnnotationLocalASN, PeerASN: c.AnnotationPeerASN, PeerIP: c.AnnotationPeerIP,
		SrcIP: c.AnnotationSrcIP, BGPPass: c.AnnotationBGPPass, NetworkIPv4Private: c.AnnotationNetworkIPv4Private,
		OmitBGPPass: !c.AnnotateBGPPass,
	}
}

// SDK converts the templates to the module payload's form.
func (t Templates) SDK() sdk.AnnotationTemplates {
	return sdk.AnnotationTemplates{LocalASN: t.LocalASN, PeerASN: t.PeerASN, PeerIP: t.PeerIP, SrcIP: t.SrcIP, BGPPass: t.BGPPass}
}

// SDK converts the node to the module payload's form.
func (n Node) SDK() sdk.Node {
	out := sdk.Node{Name: n.Name, Labels: n.Labels, LocalASN: n.LocalASN, SourceIP: n.SourceIP, Peers: []sdk.Peer{}}
	for _, p := range n.Peers {
		out.Peers = append(out.Peers, p.SDK())
	}
	return out
}

// SDK converts the peer to the module payload's form.
func (p Peer) SDK() sdk.Peer {
	return sdk.Peer{ASN: p.ASN, IP: p.IP, Password: sdk.Secret(p.Password.Reveal()), Multihop: p.Multihop}
}
