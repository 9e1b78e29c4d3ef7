package metallb

import (
	"reflect"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestObjectName(t *testing.T) {
	long := strings.Repeat("a", 250)
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"default", "nginx"}, "default.nginx"},
		{[]string{"Default", "nginx"}, "default.nginx-"},
		{[]string{"a_b", "c"}, "a-b.c-"},
		{[]string{long, "svc"}, long[:244] + "-"},
	} {
		got := ObjectName(".", tc.parts...)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("ObjectName(%v) = %q, want prefix %q", tc.parts, got, tc.want)
		}
		if len(got) > 253 {
			t.Errorf("ObjectName(%v) is %d long", tc.parts, len(got))
		}
	}
	// Names that upstream's stripping made equal stay apart.
	if ObjectName(".", "a_b", "c") == ObjectName(".", "a-b", "c") {
		t.Error("a_b.c and a-b.c collide")
	}
}

func TestPools(t *testing.T) {
	svc := func(ns, name, key string, ips ...string) sdk.Service {
		return sdk.Service{Namespace: ns, Name: name, SharingKey: key, IPs: ips}
	}
	for _, tc := range []struct {
		name     string
		services []sdk.Service
		want     []Pool
		warnings int
	}{
		{"one per Service", []sdk.Service{svc("b", "y", "", "192.0.2.2"), svc("a", "x", "", "192.0.2.1")},
			[]Pool{{Services: []string{"a/x"}, CIDRs: []string{"192.0.2.1/32"}}, {Services: []string{"b/y"}, CIDRs: []string{"192.0.2.2/32"}}}, 0},
		{"shared key, same IP", []sdk.Service{svc("a", "tcp", "k", "192.0.2.1"), svc("a", "udp", "k", "192.0.2.1")},
			[]Pool{{Services: []string{"a/tcp", "a/udp"}, CIDRs: []string{"192.0.2.1/32"}, SharingKey: "k"}}, 0},
		{"same IP without a key warns", []sdk.Service{svc("a", "x", "", "192.0.2.1"), svc("a", "y", "", "192.0.2.1")},
			[]Pool{{Services: []string{"a/x", "a/y"}, CIDRs: []string{"192.0.2.1/32"}}}, 1},
		{"dual stack", []sdk.Service{svc("a", "x", "", "2001:db8::1", "192.0.2.1")},
			[]Pool{{Services: []string{"a/x"}, CIDRs: []string{"192.0.2.1/32", "2001:db8::1/128"}}}, 0},
		{"chain through a shared IP", []sdk.Service{svc("a", "x", "k", "192.0.2.1", "192.0.2.2"), svc("a", "y", "k", "192.0.2.2"), svc("a", "z", "k", "192.0.2.1")},
			[]Pool{{Services: []string{"a/x", "a/y", "a/z"}, CIDRs: []string{"192.0.2.1/32", "192.0.2.2/32"}, SharingKey: "k"}}, 0},
		{"bad IP", []sdk.Service{svc("a", "x", "", "nope")}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := Pools(tc.services)
			if !reflect.DeepEqual(got, tc.want) || len(warnings) != tc.warnings {
				t.Errorf("got %+v %v\nwant %+v and %d warnings", got, warnings, tc.want, tc.warnings)
			}
		})
	}
}

// TestPoolLocation: a pool is where its located addresses are, when they
// agree; the Services sharing an address share its location; an address
// without one does not unlocate the pool; a facility's reservation selects
// nodes by facility.
func TestPoolLocation(t *testing.T) {
	sv := sdk.AddressLocation{Metro: "sv"}
	da11 := sdk.AddressLocation{Metro: "da", Facility: "da11"}
	at := func(ip string, l sdk.AddressLocation) []sdk.AddressLocation {
		l.IP = ip
		return []sdk.AddressLocation{l}
	}
	pools, warnings := Pools([]sdk.Service{
		{Namespace: "a", Name: "one", IPs: []string{"198.18.0.1"}, Locations: at("198.18.0.1", sv)},
		{Namespace: "a", Name: "shared-1", IPs: []string{"198.18.0.2"}, SharingKey: "k", Locations: at("198.18.0.2", da11)},
		{Namespace: "a", Name: "shared-2", IPs: []string{"198.18.0.2", "2604:1380::2"}, SharingKey: "k", Locations: at("198.18.0.2", da11)},
		{Namespace: "a", Name: "unknown", IPs: []string{"198.18.0.3"}},
	})
	if len(warnings) != 0 || len(pools) != 3 {
		t.Fatalf("pools %+v, warnings %v", pools, warnings)
	}
	for i, want := range []struct {
		loc        sdk.AddressLocation
		key, value string
		ok         bool
	}{
		{sv, sdk.MetroLabel, "sv", true},
		{da11, sdk.FacilityLabel, "da11", true},
		{sdk.AddressLocation{}, sdk.MetroLabel, "", false},
	} {
		key, value, ok := pools[i].NodeSelector()
		if pools[i].Location != want.loc || key != want.key || value != want.value || ok != want.ok {
			t.Errorf("pool %v: location %+v, selector %s=%s %v; want %+v, %s=%s %v", pools[i].Services, pools[i].Location, key, value, ok, want.loc, want.key, want.value, want.ok)
		}
	}
	nodes := []sdk.Node{{Name: "n-sv", Labels: map[string]string{sdk.MetroLabel: "sv"}}, {Name: "n-da", Labels: map[string]string{sdk.MetroLabel: "da", sdk.FacilityLabel: "da11"}}}
	if n, _, _ := Outside(pools, nodes); n != 2 {
		t.Errorf("Outside = %d pools, want 2", n)
	}
	if n, _, _ := Outside(pools, nodes[:1]); n != 1 {
		t.Errorf("Outside with the sv node alone = %d pools, want 1", n)
	}
}

// TestPoolSelectsFacilityFallback: a facility's pool selects nodes of that
// facility and, for nodes without a facility label (as upstream v3.8.1
// left them), nodes of its metro; never a node of another facility.
func TestPoolSelectsFacilityFallback(t *testing.T) {
	p := Pool{Location: sdk.AddressLocation{Metro: "da", Facility: "da11"}}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{sdk.MetroLabel: "da", sdk.FacilityLabel: "da11"}, true},
		{map[string]string{sdk.MetroLabel: "da"}, true},
		{map[string]string{sdk.MetroLabel: "da", sdk.FacilityLabel: "da6"}, false},
		{map[string]string{sdk.MetroLabel: "sv"}, false},
		{nil, false},
	} {
		if got := p.Selects(tc.labels); got != tc.want {
			t.Errorf("Selects(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
	if (Pool{}).Selects(nil) != true {
		t.Error("a pool without a location does not select every node")
	}
}
