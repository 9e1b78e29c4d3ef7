package bgp

import (
	"reflect"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

var tmpl = lbsnapshot.Templates{
	LocalASN: config.DefaultAnnotationLocalASN, PeerASN: config.DefaultAnnotationPeerASN,
	PeerIP: config.DefaultAnnotationPeerIP, SrcIP: config.DefaultAnnotationSrcIP,
	BGPPass: config.DefaultAnnotationBGPPass, NetworkIPv4Private: "metal.equinix.com/network-4-private",
}

func sp(s string) *string { return &s }

func TestAnnotations(t *testing.T) {
	n := lbsnapshot.Node{Name: "w1", LocalASN: 65000, SourceIP: "10.0.0.5", PrivateNetwork: "10.0.0.0/25",
		// deliberately unsorted: numbering follows the peer IP
		Peers: []lbsnapshot.Peer{{ASN: 65530, IP: "169.254.255.2", Password: "pw", Multihop: true}, {ASN: 65530, IP: "169.254.255.1", Password: "pw", Multihop: true}}}
	want := map[string]string{
		"metal.equinix.com/network-4-private":    "10.0.0.0/25",
		"metal.equinix.com/bgp-peers-0-node-asn": "65000",
		"metal.equinix.com/bgp-peers-0-peer-asn": "65530",
		"metal.equinix.com/bgp-peers-0-peer-ip":  "169.254.255.1",
		"metal.equinix.com/bgp-peers-0-src-ip":   "10.0.0.5",
		"metal.equinix.com/bgp-peers-0-bgp-pass": "cHc=",
		"metal.equinix.com/bgp-peers-1-node-asn": "65000",
		"metal.equinix.com/bgp-peers-1-peer-asn": "65530",
		"metal.equinix.com/bgp-peers-1-peer-ip":  "169.254.255.2",
		"metal.equinix.com/bgp-peers-1-src-ip":   "10.0.0.5",
		"metal.equinix.com/bgp-peers-1-bgp-pass": "cHc=",
		// Beside the peer IP, in the same write: kube-vip reads once.
		"metal.equinix.com/bgp-peers-0-peer-multi-hop": "true",
		"metal.equinix.com/bgp-peers-1-peer-multi-hop": "true",
	}
	if got := Annotations(tmpl, n); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestAnnotationPatch(t *testing.T) {
	cases := []struct {
		name    string
		current map[string]string
		want    map[string]string
		patch   map[string]*string
	}{
		{name: "nothing to do", current: map[string]string{"a": "1", "metal.equinix.com/bgp-peers-0-peer-ip": "x"}, want: map[string]string{"metal.equinix.com/bgp-peers-0-peer-ip": "x"}, patch: map[string]*string{}},
		{name: "new and changed", current: map[string]string{"metal.equinix.com/bgp-peers-0-peer-ip": "x"}, want: map[string]string{"metal.equinix.com/bgp-peers-0-peer-ip": "y", "metal.equinix.com/bgp-peers-0-src-ip": "z"},
			patch: map[string]*string{"metal.equinix.com/bgp-peers-0-peer-ip": sp("y"), "metal.equinix.com/bgp-peers-0-src-ip": sp("z")}},
		{name: "an index that went away is removed, foreign annotations stay",
			current: map[string]string{"metal.equinix.com/bgp-peers-0-peer-ip": "x", "metal.equinix.com/bgp-peers-1-peer-ip": "y", "metal.equinix.com/bgp-peers-12-bgp-pass": "p", "other.io/bgp-peers-1-peer-ip": "keep", "metal.equinix.com/bgp-peers-x-peer-ip": "keep"},
			want:    map[string]string{"metal.equinix.com/bgp-peers-0-peer-ip": "x"},
			patch:   map[string]*string{"metal.equinix.com/bgp-peers-1-peer-ip": nil, "metal.equinix.com/bgp-peers-12-bgp-pass": nil}},
		{name: "deselected node loses all of ours", current: map[string]string{"metal.equinix.com/network-4-private": "10.0.0.0/25", "metal.equinix.com/bgp-peers-0-node-asn": "65000"}, want: map[string]string{},
			patch: map[string]*string{"metal.equinix.com/network-4-private": nil, "metal.equinix.com/bgp-peers-0-node-asn": nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AnnotationPatch(tmpl, tc.current, tc.want); !reflect.DeepEqual(got, tc.patch) {
				t.Fatalf("got %v, want %v", got, tc.patch)
			}
		})
	}
}

func TestNodeFrom(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"a": "b"}}}
	priv := metalv1.IPAssignment{Address: sp("10.0.0.5"), AddressFamily: ptr(int32(4)), Public: ptr(false), Management: ptr(true),
		ParentBlock: &metalv1.ParentBlock{Network: sp("10.0.0.0"), Cidr: ptr(int32(25))}}
	dev := &metalv1.Device{Id: sp("d1"), IpAddresses: []metalv1.IPAssignment{priv}}
	nbs := []metalv1.BgpNeighborData{
		{AddressFamily: ptr(int32(6)), CustomerAs: ptr(int32(65000)), CustomerIp: sp("2604:1380:4641:c500::1"), PeerAs: ptr(int32(65530)),
			PeerIps: []string{"fc00::f", "fc00::e"}, Md5Password: sp("secret")},
		{AddressFamily: ptr(int32(4)), CustomerAs: ptr(int32(65000)), CustomerIp: sp("10.0.0.5"), PeerAs: ptr(int32(65530)),
			PeerIps: []string{"169.254.255.2", "169.254.255.1"}, Md5Password: sp("secret"), Multihop: ptr(true)},
	}
	got := NodeFrom(node, "d1", dev, nbs)
	// The IPv4 neighbour says multihop, as Equinix's do; the IPv6 one
	// does not say.
	want := lbsnapshot.Node{Name: "w1", Labels: map[string]string{"a": "b"}, DeviceID: "d1", LocalASN: 65000, SourceIP: "10.0.0.5", PrivateNetwork: "10.0.0.0/25",
		Peers:      []lbsnapshot.Peer{{ASN: 65530, IP: "169.254.255.1", Password: "secret", Multihop: true}, {ASN: 65530, IP: "169.254.255.2", Password: "secret", Multihop: true}},
		SourceIPv6: "2604:1380:4641:c500::1",
		PeersV6:    []lbsnapshot.Peer{{ASN: 65530, IP: "fc00::e", Password: "secret"}, {ASN: 65530, IP: "fc00::f", Password: "secret"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// With annotateBGPPass false the password annotations are not rendered, and
// the ones a node carries from before are removed; the rest stays.
func TestAnnotationsWithoutPassword(t *testing.T) {
	omit := tmpl
	omit.OmitBGPPass = true
	n := lbsnapshot.Node{Name: "w1", LocalASN: 65000, SourceIP: "10.0.0.5", Peers: []lbsnapshot.Peer{{ASN: 65530, IP: "169.254.255.1", Password: "pw"}}}
	got := Annotations(omit, n)
	if _, ok := got["metal.equinix.com/bgp-peers-0-bgp-pass"]; ok || got["metal.equinix.com/bgp-peers-0-peer-ip"] != "169.254.255.1" {
		t.Fatalf("annotations %v: want the peer's without the password", got)
	}
	before := Annotations(tmpl, n)
	patch := AnnotationPatch(omit, before, got)
	if want := map[string]*string{"metal.equinix.com/bgp-peers-0-bgp-pass": nil}; !reflect.DeepEqual(patch, want) {
		t.Fatalf("patch %v, want only the password annotation removed", patch)
	}
}

// TestIPv6Annotations: a node's IPv6 peers are annotated under their own
// names (bgp-peers-v6-<n>-…), with the device's IPv6 as the source; the
// IPv4 annotations keep their names, indexes and values; a node that is
// deselected loses both.
func TestIPv6Annotations(t *testing.T) {
	n := lbsnapshot.Node{Name: "w1", LocalASN: 65000, SourceIP: "10.0.0.5",
		Peers:      []lbsnapshot.Peer{{ASN: 65530, IP: "169.254.255.1", Password: "pw"}, {ASN: 65530, IP: "169.254.255.2", Password: "pw"}},
		SourceIPv6: "2604:1380:4641:c500::1",
		PeersV6:    []lbsnapshot.Peer{{ASN: 65530, IP: "fc00::e", Password: "pw"}, {ASN: 65530, IP: "fc00::f", Password: "pw"}}}
	got := Annotations(tmpl, n)
	v4only := n
	v4only.SourceIPv6, v4only.PeersV6 = "", nil
	for k, v := range Annotations(tmpl, v4only) {
		if got[k] != v {
			t.Errorf("IPv4 annotation %s = %q with IPv6 peers, %q without", k, got[k], v)
		}
	}
	for k, v := range map[string]string{
		"metal.equinix.com/bgp-peers-v6-0-peer-ip":  "fc00::e",
		"metal.equinix.com/bgp-peers-v6-1-peer-ip":  "fc00::f",
		"metal.equinix.com/bgp-peers-v6-0-src-ip":   "2604:1380:4641:c500::1",
		"metal.equinix.com/bgp-peers-v6-1-node-asn": "65000",
		"metal.equinix.com/bgp-peers-v6-1-peer-asn": "65530",
		"metal.equinix.com/bgp-peers-v6-0-bgp-pass": "cHc=",
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != 24 { // 2×6 IPv4, 2×6 IPv6; no private network in n
		t.Errorf("%d annotations, want 24: %v", len(got), got)
	}
	patch := AnnotationPatch(tmpl, got, map[string]string{})
	for k := range got {
		if v, ok := patch[k]; !ok || v != nil {
			t.Errorf("deselected: %s not removed", k)
		}
	}
}
