package bgp

import (
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// FuzzNodeAnnotations fuzzes the BGP node annotations: the names come from
// the configuration (the five per-peer templates, one per line, as
// METAL_ANNOTATION_* would set them; a set the configuration refuses is
// skipped), a node carries any annotations (one name=value per line) and
// has any peers (comma-separated IPs, one password). Annotations renders
// only names that are the CCM's (IsCoreAnnotation or the private-network
// one); AnnotationPatch, applied to the node, leaves exactly those of the CCM's
// annotations, keeps every other annotation as it was, and patches nothing
// more once applied.
func FuzzNodeAnnotations(f *testing.F) {
	for _, s := range []struct {
		templates, current, peers, password string
		omit                                bool
	}{
		{"", "", "169.254.255.1,169.254.255.2", "pw", false},
		{"", "metal.equinix.com/bgp-peers-0-peer-ip=169.254.255.9\nmetal.equinix.com/bgp-peers-7-peer-asn=1\nother=x", "169.254.255.1", "", false},
		{"", "metal.equinix.com/bgp-peers-v6-3-peer-ip=fc00::e\nmetal.equinix.com/bgp-peers-01-src-ip=x\nmetal.equinix.com/network-4-private=10.0.0.0/8", "fc00::e,169.254.255.1,fc00::f", "p\x00ss", true},
		{"a.io/{{n}}-asn\na.io/{{n}}-peer-asn\na.io/{{n}}-ip\na.io/{{n}}-src\na.io/{{n}}-pass", "a.io/1-ip=x\na.io/v6-0-ip=y\na.io/x-ip=z", "169.254.255.1,fc00::e", "pw", false},
		{"{{n}}\nb{{n}}\nc{{n}}\nd{{n}}\ne{{n}}", "0=a\nv6-0=b\nb12=c", "169.254.255.1,fc00::e", "", true},
	} {
		f.Add(s.templates, s.current, s.peers, s.password, s.omit)
	}
	envNames := []string{"METAL_ANNOTATION_LOCAL_ASN", "METAL_ANNOTATION_PEER_ASN", "METAL_ANNOTATION_PEER_IP", "METAL_ANNOTATION_SRC_IP", "METAL_ANNOTATION_BGP_PASS"}
	f.Fuzz(func(t *testing.T, templates, current, peers, password string, omit bool) {
		env := []string{"METAL_API_KEY=k", "METAL_PROJECT_ID=p", "METAL_ANNOTATE_BGP_PASS=" + strconv.FormatBool(!omit)}
		if templates != "" {
			for i, v := range strings.SplitN(templates, "\n", len(envNames)) {
				env = append(env, envNames[i]+"="+v)
			}
		}
		cfg, err := config.Load(config.Sources{Environ: env})
		if err != nil {
			return // the configuration refuses these names
		}
		tm := lbsnapshot.TemplatesFrom(cfg)

		n := lbsnapshot.Node{Name: "w1", LocalASN: 65000, SourceIP: "10.0.0.5", SourceIPv6: "2604:1380::5", PrivateNetwork: "10.0.0.0/25"}
		if peers != "" {
			for _, ip := range strings.Split(peers, ",") {
				p := lbsnapshot.Peer{ASN: 65530, IP: ip, Password: config.Secret(password)}
				if strings.Contains(ip, ":") {
					n.PeersV6 = append(n.PeersV6, p)
				} else {
					n.Peers = append(n.Peers, p)
				}
			}
		}
		want := Annotations(tm, n)
		sdkT := tm.SDK()
		for k := range want {
			if k != tm.NetworkIPv4Private && !sdkT.IsCoreAnnotation(k) {
				t.Fatalf("templates %+v: %q is rendered but not the CCM's", sdkT, k)
			}
		}

		cur := map[string]string{}
		if current != "" {
			for _, line := range strings.Split(current, "\n") {
				k, v, _ := strings.Cut(line, "=")
				cur[k] = v
			}
		}
		node := maps.Clone(cur)
		for k, v := range AnnotationPatch(tm, cur, want) {
			if v == nil {
				delete(node, k)
			} else {
				node[k] = *v
			}
		}
		for k, v := range want {
			if node[k] != v {
				t.Fatalf("after the patch %s=%q, want %q", k, node[k], v)
			}
		}
		for k, v := range node {
			_, wanted := want[k]
			ours := k == tm.NetworkIPv4Private || sdkT.IsCoreAnnotation(k)
			if !wanted && ours {
				t.Fatalf("after the patch the CCM's %s=%q is left", k, v)
			}
			if !ours && cur[k] != v {
				t.Fatalf("the patch changed %s, which is not the CCM's", k)
			}
		}
		if again := AnnotationPatch(tm, node, want); len(again) != 0 {
			t.Fatalf("a second patch: %v", again)
		}
	})
}
