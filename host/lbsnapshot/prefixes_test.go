package lbsnapshot

import (
	"reflect"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestAnnouncedPerNode(t *testing.T) {
	node := func(name, metro, facility string) sdk.Node {
		l := map[string]string{}
		if metro != "" {
			l[sdk.MetroLabel] = metro
		}
		if facility != "" {
			l[sdk.FacilityLabel] = facility
		}
		return sdk.Node{Name: name, Labels: l}
	}
	svc := func(ips []string, locs ...sdk.AddressLocation) sdk.Service {
		return sdk.Service{IPs: ips, Locations: locs}
	}
	nodes := []sdk.Node{node("da-1", "da", "da11"), node("da-2", "da", "da12"), node("da-old", "da", ""), node("sv-1", "sv", "sv15"), node("nowhere", "", "")}
	for _, tc := range []struct {
		name     string
		services []sdk.Service
		want     map[string]int
	}{
		{name: "no location known: every node announces every address",
			services: []sdk.Service{svc([]string{"1.0.0.1"}), svc([]string{"1.0.0.2", "1.0.0.1"})},
			want:     map[string]int{"da-1": 2, "da-2": 2, "da-old": 2, "sv-1": 2, "nowhere": 2}},
		{name: "metro reservations count in their metro only",
			services: []sdk.Service{
				svc([]string{"1.0.0.1"}, sdk.AddressLocation{IP: "1.0.0.1", Metro: "da"}),
				svc([]string{"1.0.0.2"}, sdk.AddressLocation{IP: "1.0.0.2", Metro: "da"}),
				svc([]string{"1.0.0.3"}, sdk.AddressLocation{IP: "1.0.0.3", Metro: "sv"}),
				svc([]string{"9.9.9.9"})},
			want: map[string]int{"da-1": 3, "da-2": 3, "da-old": 3, "sv-1": 2, "nowhere": 1}},
		{name: "a facility's reservation: its facility, and its metro's nodes without a facility label",
			services: []sdk.Service{svc([]string{"1.0.0.1"}, sdk.AddressLocation{IP: "1.0.0.1", Metro: "da", Facility: "da11"})},
			want:     map[string]int{"da-1": 1, "da-2": 0, "da-old": 1, "sv-1": 0, "nowhere": 0}},
		{name: "a shared address counts once",
			services: []sdk.Service{
				svc([]string{"1.0.0.1"}, sdk.AddressLocation{IP: "1.0.0.1", Metro: "sv"}),
				svc([]string{"1.0.0.1"}, sdk.AddressLocation{IP: "1.0.0.1", Metro: "sv"})},
			want: map[string]int{"da-1": 0, "da-2": 0, "da-old": 0, "sv-1": 1, "nowhere": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := sdk.GenerateRequest{Services: tc.services, Nodes: nodes}
			got := AnnouncedPerNode(req)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// IPv4 only: the IPv4 session carries it all.
			for n, a := range announcedPerFamily(req) {
				if a.IPv4 != tc.want[n] || a.IPv6 != 0 {
					t.Errorf("%s: per family %+v, want IPv4 %d", n, a, tc.want[n])
				}
			}
		})
	}
}

// TestAnnouncedPerFamily: a node's IPv4 and IPv6 sessions are separate,
// each under the prefix limit on its own; an IPv6 address counts only on
// nodes with an IPv6 peer, located as an IPv4 one.
func TestAnnouncedPerFamily(t *testing.T) {
	node := func(name, metro string, peers ...string) sdk.Node {
		n := sdk.Node{Name: name, Labels: map[string]string{sdk.MetroLabel: metro}, Peers: []sdk.Peer{}}
		for _, ip := range peers {
			n.Peers = append(n.Peers, sdk.Peer{IP: ip})
		}
		return n
	}
	nodes := []sdk.Node{
		node("sv-dual", "sv", "169.254.255.1", "169.254.255.2", "fc00::e", "fc00::f"),
		node("sv-v4", "sv", "169.254.255.1", "169.254.255.2"),
		node("da-dual", "da", "169.254.255.1", "fc00::e"),
	}
	loc := func(ip, metro string) sdk.AddressLocation { return sdk.AddressLocation{IP: ip, Metro: metro} }
	services := []sdk.Service{
		{IPs: []string{"86.109.1.5", "2604:1380:4641:c500::3"}, Locations: []sdk.AddressLocation{loc("86.109.1.5", "sv"), loc("2604:1380:4641:c500::3", "sv")}},
		{IPs: []string{"2604:1380:4641:c500::4"}, Locations: []sdk.AddressLocation{loc("2604:1380:4641:c500::4", "sv")}},
		{IPs: []string{"2604:1380:4641:c500::4"}, Locations: []sdk.AddressLocation{loc("2604:1380:4641:c500::4", "sv")}}, // shared: once
		{IPs: []string{"2604:1380:4641:c600::5"}}, // no known location: every node with an IPv6 session
		{IPs: []string{"86.109.2.5"}, Locations: []sdk.AddressLocation{loc("86.109.2.5", "da")}},
	}
	req := sdk.GenerateRequest{Services: services, Nodes: nodes}
	want := map[string]announced{
		"sv-dual": {IPv4: 1, IPv6: 3},
		"sv-v4":   {IPv4: 1, IPv6: 0},
		"da-dual": {IPv4: 1, IPv6: 1},
	}
	if got := announcedPerFamily(req); !reflect.DeepEqual(got, want) {
		t.Errorf("per family %v, want %v", got, want)
	}
	if got, want := AnnouncedPerNode(req), map[string]int{"sv-dual": 3, "sv-v4": 1, "da-dual": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("per node (the fuller session) %v, want %v", got, want)
	}
}
