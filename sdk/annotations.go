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
// for each peer, in order of peer IP (compared as strings, as upstream sorts
// them), the local ASN, peer ASN, peer IP, source IP and the base64 of the
// password, under the template names with {{n}} replaced by 0, 1, ...
//
// The CCM core writes these on every BGP node through this very function, so
// modules and core agree byte for byte; modules need it only to reason about
// what the node already carries. Like upstream, a peer without a password
// still gets the bgp-pass annotation, with an empty value. A template left
// empty is skipped.
func RenderBGPAnnotations(t AnnotationTemplates, n Node) map[string]string {
	peers := append([]Peer(nil), n.Peers...)
	sort.SliceStable(peers, func(i, j int) bool { return peers[i].IP < peers[j].IP })
	out := make(map[string]string, 5*len(peers))
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
		put(t.SrcIP, n.SourceIP)
		put(t.BGPPass, base64.StdEncoding.EncodeToString([]byte(p.Password)))
	}
	return out
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
	for _, tmpl := range []string{t.LocalASN, t.PeerASN, t.PeerIP, t.SrcIP, t.BGPPass} {
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
