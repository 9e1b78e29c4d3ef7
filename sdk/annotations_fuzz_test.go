package sdk_test

import (
	"encoding/base64"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// FuzzPeerAnnotations fuzzes the BGP peer annotations: their name
// templates (five, one per line), a node's peers (comma-separated IPs, one
// ASN and password) and any annotation name. Templates are as the CCM's
// configuration accepts them: each has {{n}} exactly once.
//
// Every name RenderBGPAnnotations (IPv4) and RenderBGPAnnotationsIPv6
// render is one IsCoreAnnotation matches, so the core finds and removes
// it; a name IsPeerAnnotation matches is a template with its {{n}}
// replaced by digits (matching parses the index, and formatting the index
// gives the name back); and, unless two templates render one name, the
// values format what they carry so that it parses back: the ASNs, the peer
// IP, the source IP and the base64 password of each peer, in order of IP.
func FuzzPeerAnnotations(f *testing.F) {
	defaults := "metal.equinix.com/bgp-peers-{{n}}-node-asn\nmetal.equinix.com/bgp-peers-{{n}}-peer-asn\nmetal.equinix.com/bgp-peers-{{n}}-peer-ip\nmetal.equinix.com/bgp-peers-{{n}}-src-ip\nmetal.equinix.com/bgp-peers-{{n}}-bgp-pass"
	for _, s := range []struct {
		templates, peers, password, name string
		asn                              uint32
	}{
		{defaults, "169.254.255.2,169.254.255.1", "pw", "metal.equinix.com/bgp-peers-0-peer-ip", 65530},
		{defaults, "fc00::e,169.254.255.1,fc00::f", "", "metal.equinix.com/bgp-peers-v6-1-src-ip", 0},
		{defaults, "", "x", "metal.equinix.com/bgp-peers--peer-ip", 1},
		{"{{n}}\na{{n}}\nb{{n}}\nc{{n}}\nd{{n}}", "1.1.1.1,2.2.2.2", "p\x00\xff", "v6-0", 4294967295},
		{"x{{n}}1\nx1{{n}}\ny{{n}}\nz{{n}}\nw{{n}}", "1.1.1.1,1.1.1.2", "pw", "x11", 65000},
		{"a/{{n}}-{{n}}\nb{{n}}\nc{{n}}\nd{{n}}\ne{{n}}", "1.1.1.1", "pw", "a/0-0", 65000},
	} {
		f.Add(s.templates, s.peers, s.password, s.name, s.asn)
	}
	f.Fuzz(func(t *testing.T, templates, peers, password, name string, asn uint32) {
		parts := strings.SplitN(templates, "\n", 5)
		if len(parts) != 5 {
			return
		}
		for i, p := range parts {
			if strings.Count(p, sdk.Placeholder) != 1 || strings.Contains(strings.Replace(p, sdk.Placeholder, "", 1), "{{n}}") {
				return // refused by the configuration: {{n}} once
			}
			for _, q := range parts[:i] {
				if p == q {
					return // refused by the configuration: one name each
				}
			}
		}
		tm := sdk.AnnotationTemplates{LocalASN: parts[0], PeerASN: parts[1], PeerIP: parts[2], SrcIP: parts[3], BGPPass: parts[4]}
		node := sdk.Node{LocalASN: asn, SourceIP: "10.0.0.5", SourceIPv6: "2604:1380::5"}
		if peers != "" {
			for _, ip := range strings.Split(peers, ",") {
				node.Peers = append(node.Peers, sdk.Peer{ASN: asn / 2, IP: ip, Password: sdk.Secret(password)})
			}
		}
		if len(node.Peers) > 10 {
			return
		}
		for fam, rendered := range map[string]map[string]string{"IPv4": sdk.RenderBGPAnnotations(tm, node), "IPv6": sdk.RenderBGPAnnotationsIPv6(tm, node)} {
			for k := range rendered {
				if !tm.IsCoreAnnotation(k) {
					t.Fatalf("templates %+v: the %s annotation %q is not the core's", tm, fam, k)
				}
			}
			v6 := fam == "IPv6"
			tf, src := tm, node.SourceIP
			if v6 {
				tf, src = tm.IPv6(), node.SourceIPv6
			}
			var ps []sdk.Peer
			for _, p := range node.Peers {
				if sdk.IsIPv6(p.IP) == v6 {
					ps = append(ps, p)
				}
			}
			if len(rendered) != 5*len(ps) {
				continue // two templates render one name: no value to check
			}
			sort.SliceStable(ps, func(i, j int) bool { return ps[i].IP < ps[j].IP })
			for i, p := range ps {
				at := func(tmpl string) string { return rendered[strings.ReplaceAll(tmpl, sdk.Placeholder, strconv.Itoa(i))] }
				if n, err := strconv.ParseUint(at(tf.LocalASN), 10, 32); err != nil || uint32(n) != asn {
					t.Fatalf("%s peer %d: local ASN %q, want %d", fam, i, at(tf.LocalASN), asn)
				}
				if n, err := strconv.ParseUint(at(tf.PeerASN), 10, 32); err != nil || uint32(n) != p.ASN {
					t.Fatalf("%s peer %d: peer ASN %q, want %d", fam, i, at(tf.PeerASN), p.ASN)
				}
				if at(tf.PeerIP) != p.IP || at(tf.SrcIP) != src {
					t.Fatalf("%s peer %d: IP %q, source %q; want %q, %q", fam, i, at(tf.PeerIP), at(tf.SrcIP), p.IP, src)
				}
				if b, err := base64.StdEncoding.DecodeString(at(tf.BGPPass)); err != nil || string(b) != password {
					t.Fatalf("%s peer %d: password %q does not decode to the password", fam, i, at(tf.BGPPass))
				}
			}
		}

		if tm.IsPeerAnnotation(name) {
			found := false
			for _, tmpl := range parts {
				pre, suf, _ := strings.Cut(tmpl, sdk.Placeholder)
				if len(name) > len(pre)+len(suf) && strings.HasPrefix(name, pre) && strings.HasSuffix(name, suf) {
					idx := name[len(pre) : len(name)-len(suf)]
					if strings.Trim(idx, "0123456789") == "" && strings.ReplaceAll(tmpl, sdk.Placeholder, idx) == name {
						found = true
					}
				}
			}
			if !found {
				t.Fatalf("templates %+v match %q, which no template with an index formats", tm, name)
			}
		}
	})
}
