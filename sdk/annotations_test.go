package sdk_test

import (
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestIsPeerAnnotation(t *testing.T) {
	custom := sdk.AnnotationTemplates{PeerIP: "x.io/{{n}}", BGPPass: "pass-{{n}}-x", SrcIP: "no-placeholder"}
	for _, tc := range []struct {
		tmpl sdk.AnnotationTemplates
		name string
		want bool
	}{
		{templates, "metal.equinix.com/bgp-peers-0-peer-ip", true},
		{templates, "metal.equinix.com/bgp-peers-12-bgp-pass", true},
		{templates, "metal.equinix.com/bgp-peers-0-node-asn", true},
		{templates, "metal.equinix.com/bgp-peers-1-peer-asn", true},
		{templates, "metal.equinix.com/bgp-peers-1-src-ip", true},
		{templates, "metal.equinix.com/bgp-peers-0-peer-multi-hop", true}, // derived from peer-ip
		{templates, "metal.equinix.com/bgp-peers-0-multi-hop", false},
		{templates, "metal.equinix.com/bgp-peers--peer-ip", false},   // no index
		{templates, "metal.equinix.com/bgp-peers-x-peer-ip", false},  // not a number
		{templates, "metal.equinix.com/bgp-peers-1a-peer-ip", false}, // not only digits
		{templates, "metal.equinix.com/bgp-peers-١-peer-ip", false},  // a non-ASCII digit
		{templates, "metal.equinix.com/bgp-peers-{{n}}-peer-ip", false},
		{templates, "other.io/bgp-peers-1-peer-ip", false},
		{templates, "metal.equinix.com/bgp-peers-1-peer-ip-extra", false},
		{templates, "metal.equinix.com/network-4-private", false},
		{custom, "x.io/7", true},
		{custom, "x.io/", false},
		{custom, "pass-3-x", true},
		{custom, "pass-3-", false},
		{custom, "no-placeholder", false}, // a template without {{n}} matches nothing
		{custom, "metal.equinix.com/bgp-peers-0-peer-ip", false},
		{custom, "x.io/7-multi-hop", false}, // custom peer IP not ending peer-ip: no multihop name
		{sdk.AnnotationTemplates{}, "", false},
	} {
		if got := tc.tmpl.IsPeerAnnotation(tc.name); got != tc.want {
			t.Errorf("%+v.IsPeerAnnotation(%q) = %v, want %v", tc.tmpl, tc.name, got, tc.want)
		}
	}
}
