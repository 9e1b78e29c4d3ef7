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
