package bgp

import (
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Annotations renders a node's annotations: the private network and, through
// the SDK's renderer, the BGP peer annotations, so that the core and any
// module that reasons about them agree byte for byte. Peers are numbered in
// the order of their IP; the password is base64, as upstream documents.
func Annotations(t lbsnapshot.Templates, n lbsnapshot.Node) map[string]string {
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

// AnnotationPatch returns the changes that bring a node's annotations to
// want: new or changed values, and nil for annotations of ours that should
// no longer exist (a peer index that went away, or every BGP annotation of a
// node that is no longer selected). It is empty when nothing changes, so a
// resync writes nothing.
func AnnotationPatch(t lbsnapshot.Templates, current, want map[string]string) map[string]*string {
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
