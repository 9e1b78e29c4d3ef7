package dataplane

import "testing"

// TestWithRouterID: the router-id zebra would give goes under each
// `router bgp` of the default VRF, and nowhere when the file sets one.
func TestWithRouterID(t *testing.T) {
	for _, tc := range []struct{ name, conf, want string }{
		{"one router", "hostname n\nrouter bgp 65000\n  no bgp default ipv4-unicast\n",
			"hostname n\nrouter bgp 65000\n  bgp router-id 10.0.0.1\n  no bgp default ipv4-unicast\n"},
		{"a VRF's router is left alone", "router bgp 65000 vrf red\n  neighbor x remote-as 1\n",
			"router bgp 65000 vrf red\n  neighbor x remote-as 1\n"},
		{"already set", "router bgp 65000\n  bgp router-id 192.0.2.9\n", "router bgp 65000\n  bgp router-id 192.0.2.9\n"},
		{"no router yet", "hostname n\n", "hostname n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(WithRouterID([]byte(tc.conf), "10.0.0.1")); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
