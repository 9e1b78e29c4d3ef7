package sdk

import (
	"encoding/base64"
	"sort"
	"strconv"
	"strings"
)

// Placeholder is what AnnotationTemplates use for the peer's index.
const Placeholder = "{{n}}"

// RenderBGPAnnotations returns the BGP node annotations upstream documents:
// for each IPv4 peer, in order of peer IP (compared as strings, as upstream
// sorts them), the local ASN, peer ASN, peer IP, source IP and the base64 of
// the password, under the template names with {{n}} replaced by 0, 1, ...;
// and beside them one upstream never wrote, the peer's multihop ("true" or
// "false", under MultiHop's name), which kube-vip reads.
//
// The CCM core writes these on every BGP node through this very function, so
// modules and core agree byte for byte; modules need it only to reason about
// what the node already carries. Like upstream, a peer without a password
// still gets the bgp-pass annotation, with an empty value. A template left
// empty is skipped. IPv6 peers (IsIPv6; ABI version 5) are left out: these
// annotations carry one source address, the IPv4 one, and their readers
// (kube-vip reads the peer IP of every index) peer with every peer IP they
// find, so an IPv6 peer here would be dialled from an IPv4 source.
func RenderBGPAnnotations(t AnnotationTemplates, n Node) map[string]string {
	return renderPeers(t, n, n.SourceIP, func(p Peer) bool { return !IsIPv6(p.IP) })
}

// RenderBGPAnnotationsIPv6 returns the annotations of the node's IPv6
// peers (ABI version 5): the same six per peer, under the names of
// t.IPv6() (metal.equinix.com/bgp-peers-v6-0-peer-ip, …), with SourceIPv6
// as the source. Their own names leave the IPv4 annotations' names and
// indexes as they were. Empty while the node has no IPv6 peer: the CCM
// gives nodes IPv6 sessions once a Service has an IPv6 address.
func RenderBGPAnnotationsIPv6(t AnnotationTemplates, n Node) map[string]string {
	return renderPeers(t.IPv6(), n, n.SourceIPv6, func(p Peer) bool { return IsIPv6(p.IP) })
}

// renderPeers renders the annotations of n's peers that keep selects.
func renderPeers(t AnnotationTemplates, n Node, src string, keep func(Peer) bool) map[string]string {
	peers := make([]Peer, 0, len(n.Peers))
	for _, p := range n.Peers {
		if keep(p) {
			peers = append(peers, p)
		}
	}
	sort.SliceStable(peers, func(i, j int) bool { return peers[i].IP < peers[j].IP })
	multiHop := t.MultiHop()
	out := make(map[string]string, 6*len(peers))
	for i, p := range peers {
		idx := strconv.Itoa(i)
		name := func(tmpl string) string { return strings.ReplaceAll(tmpl, Placeholder, idx) }
		put := func(tmpl, v string) {
			if tmpl != "" {
				out[name(tmpl)] = v
			}
		}
		put(t.LocalASN, strconv.FormatUint(uint64(n.LocalASN), 10))
		put(t.PeerASN, strconv.FormatUint(uint64(p.ASN), 10))
		put(t.PeerIP, p.IP)
		put(t.SrcIP, src)
		put(t.BGPPass, base64.StdEncoding.EncodeToString([]byte(p.Password)))
		put(multiHop, strconv.FormatBool(p.Multihop))
	}
	return out
}

// peerIPSuffix and multiHopSuffix end the names kube-vip v1.2 reads
// (pkg/manager/watch_annotations.go): <prefix>/bgp-peers-0-peer-ip and,
// beside it, <prefix>/bgp-peers-0-peer-multi-hop.
const (
	peerIPSuffix   = "peer-ip"
	multiHopSuffix = "peer-multi-hop"
)

// MultiHop is the template of the peer's multihop annotation, named from
// the peer IP template: metal.equinix.com/bgp-peers-{{n}}-peer-ip gives
// metal.equinix.com/bgp-peers-{{n}}-peer-multi-hop. It is derived, not a
// setting of its own, so it needs no new field in the request a module
// reads. A peer IP template with another ending (or without {{n}}) names
// no multihop annotation: "".
//
// The core writes it in the same patch as the other peer annotations, and
// that is the point: kube-vip stops watching a node's annotations the
// moment they name a peer, so a multihop value written after the peer IP
// (as the kube-vip module once did, in its own later write) is never read,
// and the session stays at TTL 1, which never crosses the gateway in
// front of Equinix's peers.
func (t AnnotationTemplates) MultiHop() string {
	if !strings.Contains(t.PeerIP, Placeholder) || !strings.HasSuffix(t.PeerIP, peerIPSuffix) {
		return ""
	}
	return strings.TrimSuffix(t.PeerIP, peerIPSuffix) + multiHopSuffix
}

// IPv6 returns the templates of the IPv6 peer annotations: each name with
// "v6-" before its {{n}}, so metal.equinix.com/bgp-peers-{{n}}-peer-ip
// becomes metal.equinix.com/bgp-peers-v6-{{n}}-peer-ip. A template without
// {{n}} (or empty) stays empty: it names no IPv6 annotation.
func (t AnnotationTemplates) IPv6() AnnotationTemplates {
	v6 := func(tmpl string) string {
		if !strings.Contains(tmpl, Placeholder) {
			return ""
		}
		return strings.Replace(tmpl, Placeholder, "v6-"+Placeholder, 1)
	}
	return AnnotationTemplates{LocalASN: v6(t.LocalASN), PeerASN: v6(t.PeerASN), PeerIP: v6(t.PeerIP), SrcIP: v6(t.SrcIP), BGPPass: v6(t.BGPPass)}
}

// IsCoreAnnotation reports whether name is a peer annotation the CCM core
// writes, of either family: IsPeerAnnotation of t or of t.IPv6().
func (t AnnotationTemplates) IsCoreAnnotation(name string) bool {
	return t.IsPeerAnnotation(name) || t.IPv6().IsPeerAnnotation(name)
}

// IsPeerAnnotation reports whether name is one of the peer annotations
// RenderBGPAnnotations writes, for any peer index: a template's text before
// {{n}}, one or more ASCII digits, then its text after. Templates without
// {{n}} (or empty) match nothing.
//
// It is the one matcher for these names: the core uses it to remove the
// annotations of a peer index that went away, and the host uses it to refuse
// a module that tries to write them.
func (t AnnotationTemplates) IsPeerAnnotation(name string) bool {
	for _, tmpl := range []string{t.LocalASN, t.PeerASN, t.PeerIP, t.SrcIP, t.BGPPass, t.MultiHop()} {
		pre, suf, ok := strings.Cut(tmpl, Placeholder)
		if ok && indexed(name, pre, suf) {
			return true
		}
	}
	return false
}

// indexed reports whether name is pre, at least one ASCII digit, then suf.
func indexed(name, pre, suf string) bool {
	if len(name) <= len(pre)+len(suf) || !strings.HasPrefix(name, pre) || !strings.HasSuffix(name, suf) {
		return false
	}
	for _, r := range name[len(pre) : len(name)-len(suf)] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
