package dataplane

import (
	"testing"
	"time"
)

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

// TestWithMultihopTTL: MetalLB's bare ebgp-multihop gets bgpd 8.4.4's TTL;
// a TTL given, or another neighbour command, stays as it is.
func TestWithMultihopTTL(t *testing.T) {
	for _, tc := range []struct{ name, conf, want string }{
		{"bare", "router bgp 65000\n  neighbor 169.254.255.1 ebgp-multihop\n", "router bgp 65000\n  neighbor 169.254.255.1 ebgp-multihop 255\n"},
		{"IPv6 peer, trailing blank", "  neighbor fc00::e ebgp-multihop \n", "  neighbor fc00::e ebgp-multihop 255\n"},
		{"a TTL given", "  neighbor 169.254.255.1 ebgp-multihop 2\n", "  neighbor 169.254.255.1 ebgp-multihop 2\n"},
		{"other commands", "  neighbor 169.254.255.1 remote-as 65530\n  neighbor 169.254.255.1 disable-connected-check\n", "  neighbor 169.254.255.1 remote-as 65530\n  neighbor 169.254.255.1 disable-connected-check\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(WithMultihopTTL([]byte(tc.conf))); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestFirstWith: the versions of a speaker's file say when a line was
// first read and first applied, from the given time on; a version
// superseded before it was applied counts only as read.
func TestFirstWith(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	f := &FRR{}
	f.note([]byte("network 198.18.0.7/32\n"), at(1))
	f.note([]byte("network 198.18.0.7/32\n"), at(2)) // the same file again: not a version
	f.note([]byte("network 198.18.0.7/32\nnetwork 198.18.0.8/32\n"), at(3))
	f.note([]byte("network 198.18.0.7/32\nnetwork 198.18.0.8/32\nnetwork 198.18.0.9/32\n"), at(4))
	f.noteApplied([]byte("network 198.18.0.7/32\nnetwork 198.18.0.8/32\nnetwork 198.18.0.9/32\n"), at(9))
	f.noteApplied([]byte("network 198.18.0.7/32\n"), at(5))
	for _, tc := range []struct {
		name          string
		line          string
		since         time.Time
		read, applied time.Time
	}{
		{"read and applied first", " 198.18.0.7/32", at(0), at(1), at(5)},
		{"its version superseded unapplied", " 198.18.0.8/32", at(0), at(3), at(9)},
		{"only versions read since", " 198.18.0.7/32", at(2), at(3), at(9)},
		{"never", " 198.18.0.1/32", at(0), time.Time{}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read, applied := f.FirstWith(tc.line, tc.since)
			if !read.Equal(tc.read) || !applied.Equal(tc.applied) {
				t.Errorf("FirstWith(%q) = %v, %v; want %v, %v", tc.line, read, applied, tc.read, tc.applied)
			}
		})
	}
}
