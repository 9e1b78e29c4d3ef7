package bgp

import (
	"encoding/base64"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

// Templates are the node annotation names; {{n}} is the peer's index.
type Templates struct {
	LocalASN, PeerASN, PeerIP, SrcIP, BGPPass string
	// NetworkIPv4Private is a plain name (no index).
	NetworkIPv4Private string
}

// TemplatesFrom takes the names from the configuration.
func TemplatesFrom(c *config.Config) Templates {
	return Templates{
		LocalASN: c.AnnotationLocalASN, PeerASN: c.AnnotationPeerASN, PeerIP: c.AnnotationPeerIP,
		SrcIP: c.AnnotationSrcIP, BGPPass: c.AnnotationBGPPass, NetworkIPv4Private: c.AnnotationNetworkIPv4Private,
	}
}

func (t Templates) indexed() []string {
	return []string{t.LocalASN, t.PeerASN, t.PeerIP, t.SrcIP, t.BGPPass}
}

// Annotations renders a node's BGP annotations. Peers are numbered in the
// order of their IP (as strings, as upstream did), so the numbering is
// stable whatever order the API lists them in. The password is base64, as
// upstream documents; kube-vip decodes it.
func Annotations(t Templates, n Node) map[string]string {
	out := map[string]string{}
	if n.PrivateNetwork != "" && t.NetworkIPv4Private != "" {
		out[t.NetworkIPv4Private] = n.PrivateNetwork
	}
	peers := append([]Peer(nil), n.Peers...)
	sort.Slice(peers, func(i, j int) bool { return peers[i].IP < peers[j].IP })
	for i, p := range peers {
		idx := strconv.Itoa(i)
		name := func(tmpl string) string { return strings.ReplaceAll(tmpl, config.PeerIndex, idx) }
		out[name(t.LocalASN)] = strconv.FormatUint(uint64(n.LocalASN), 10)
		out[name(t.PeerASN)] = strconv.FormatUint(uint64(p.ASN), 10)
		out[name(t.PeerIP)] = p.IP
		out[name(t.SrcIP)] = n.SourceIP
		if p.Password != "" {
			out[name(t.BGPPass)] = base64.StdEncoding.EncodeToString([]byte(p.Password.Reveal()))
		}
	}
	return out
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
	owned := t.matcher()
	for k := range current {
		if _, keep := want[k]; keep {
			continue
		}
		if owned(k) {
			patch[k] = nil
		}
	}
	return patch
}

// matcher recognises annotation names this CCM writes, for any index.
func (t Templates) matcher() func(string) bool {
	var res []*regexp.Regexp
	for _, tmpl := range t.indexed() {
		pre, post, ok := strings.Cut(tmpl, config.PeerIndex)
		if !ok {
			continue
		}
		res = append(res, regexp.MustCompile("^"+regexp.QuoteMeta(pre)+`\d+`+regexp.QuoteMeta(post)+"$"))
	}
	return func(name string) bool {
		if name == t.NetworkIPv4Private {
			return true
		}
		for _, re := range res {
			if re.MatchString(name) {
				return true
			}
		}
		return false
	}
}
