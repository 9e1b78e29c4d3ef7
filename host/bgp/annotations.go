package bgp

import (
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

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

// Annotations renders a node's annotations: the private network and, through
// the SDK's renderer, the BGP peer annotations, so that the core and any
// module that reasons about them agree byte for byte. Peers are numbered in
// the order of their IP; the password is base64, as upstream documents.
func Annotations(t Templates, n Node) map[string]string {
	render := t.SDK()
	if t.OmitBGPPass {
		render.BGPPass = "" // the renderer skips an empty template
	}
	out := sdk.RenderBGPAnnotations(render, n.SDK())
	if len(n.PeersV6) > 0 {
		v6 := sdk.Node{LocalASN: n.LocalASN, SourceIPv6: n.SourceIPv6}
		for _, p := range n.PeersV6 {
			v6.Peers = append(v6.Peers, p.SDK())
		}
		for k, v := range sdk.RenderBGPAnnotationsIPv6(render, v6) {
			out[k] = v
		}
	}
	if n.PrivateNetwork != "" && t.NetworkIPv4Private != "" {
		out[t.NetworkIPv4Private] = n.PrivateNetwork
	}
	return out
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

// AnnotationPatch returns the changes that bring a node's annotations to
// want: new or changed values, and nil for annotations of ours that should
// no longer exist (a peer index that went away, or every BGP annotation of a
// node that is no longer selected). It is empty when nothing changes, so a
// resync writes nothing.
func AnnotationPatch(t Templates, current, want map[string]string) map[string]*string {
	patch := map[string]*string{}
	for k, v := range want {
		if cur, ok := current[k]; !ok || cur != v {
			v := v
			patch[k] = &v
		}
	}
	sdkT := t.SDK()
	for k := range current {
		if _, keep := want[k]; keep {
			continue
		}
		// Ours: the private-network annotation and the peer annotations of
		// any index, matched as the module host matches them.
		if k == t.NetworkIPv4Private || sdkT.IsCoreAnnotation(k) {
			patch[k] = nil
		}
	}
	return patch
}
