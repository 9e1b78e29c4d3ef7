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
			got := AnnouncedPerNode(sdk.GenerateRequest{Services: tc.services, Nodes: nodes})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
