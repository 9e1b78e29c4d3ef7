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
		// IPv4 before IPv6 although "86." sorts after "2604:" as strings.
		{"dual stack, IPv4 first", []sdk.Service{svc("a", "x", "", "86.109.1.5", "2604:1380:4641:c500::3")},
			[]Pool{{Services: []string{"a/x"}, CIDRs: []string{"86.109.1.5/32", "2604:1380:4641:c500::3/128"}}}, 0},
		{"a sharing key's dual-stack address pair", []sdk.Service{svc("a", "tcp", "k", "86.109.1.5", "2604:1380::3"), svc("a", "udp", "k", "2604:1380::3", "86.109.1.5")},
			[]Pool{{Services: []string{"a/tcp", "a/udp"}, CIDRs: []string{"86.109.1.5/32", "2604:1380::3/128"}, SharingKey: "k"}}, 0},
		{"IPv6 only", []sdk.Service{svc("a", "x", "", "2604:1380::3")},
			[]Pool{{Services: []string{"a/x"}, CIDRs: []string{"2604:1380::3/128"}}}, 0},
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

// TestSessionsByFamily: IPv4 sessions are indexed among the IPv4 peers
// alone (the {{n}} of the node annotations, as before IPv6), IPv6 sessions
// among the IPv6 peers, each from the source address of its family.
func TestSessionsByFamily(t *testing.T) {
	nodes := []sdk.Node{
		{Name: "w2", LocalASN: 65000, SourceIP: "10.0.0.2", Peers: []sdk.Peer{{IP: "169.254.255.1"}}},
		{Name: "w1", LocalASN: 65000, SourceIP: "10.0.0.1", SourceIPv6: "2604:1380::1", Labels: map[string]string{HostnameLabel: "host-1"},
			Peers: []sdk.Peer{{IP: "fc00::f"}, {IP: "169.254.255.2"}, {IP: "fc00::e"}, {IP: "169.254.255.1"}}},
	}
	type s struct {
		node, host, src, peer string
		index                 int
	}
	flat := func(ss []Session, v6 bool) []s {
		var out []s
		for _, x := range ss {
			if x.IPv6 != v6 {
				t.Errorf("session %+v: IPv6 %v", x, x.IPv6)
			}
			out = append(out, s{x.Node, x.Hostname, x.SourceIP, x.Peer.IP, x.Index})
		}
		return out
	}
	if got, want := flat(Sessions(nodes), false), []s{
		{"w1", "host-1", "10.0.0.1", "169.254.255.1", 0}, {"w1", "host-1", "10.0.0.1", "169.254.255.2", 1},
		{"w2", "w2", "10.0.0.2", "169.254.255.1", 0},
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("IPv4 sessions %v, want %v", got, want)
	}
	if got, want := flat(SessionsV6(nodes), true), []s{
		{"w1", "host-1", "2604:1380::1", "fc00::e", 0}, {"w1", "host-1", "2604:1380::1", "fc00::f", 1},
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("IPv6 sessions %v, want %v", got, want)
	}
}

// TestPeerNameV6NeverAnIPv4Name: no node's IPv6 peer name is any node's
// IPv4 peer name, including the node named as "<node>-v6" would suggest.
func TestPeerNameV6NeverAnIPv4Name(t *testing.T) {
	nodes := []string{"a", "a-v6", "a-0", "a-0-v6", "a-v6-0", "w.example.com", strings.Repeat("n", 252)}
	v4 := map[string]string{}
	for _, n := range nodes {
		for i := range 3 {
			v4[PeerName(n, i)] = n
		}
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		for i := range 3 {
			name := PeerNameV6(n, i)
			if other, ok := v4[name]; ok {
				t.Errorf("PeerNameV6(%q, %d) = %q, the IPv4 peer name of %q", n, i, name, other)
			}
			if seen[name] {
				t.Errorf("PeerNameV6(%q, %d) = %q twice", n, i, name)
			}
			seen[name] = true
		}
	}
	if got := PeerNameV6("worker-1", 0); got != "worker-1-0-v6" {
		t.Errorf("PeerNameV6 = %q", got)
	}
}

// TestEBGPMultiHop: multihop reaches MetalLB where Equinix says it and the
// session is eBGP; never on an iBGP session, which MetalLB refuses.
func TestEBGPMultiHop(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Session
		want bool
	}{
		{"Equinix's eBGP peer", Session{LocalASN: 65000, Peer: sdk.Peer{ASN: 65530, Multihop: true}}, true},
		{"not multihop", Session{LocalASN: 65000, Peer: sdk.Peer{ASN: 65530}}, false},
		{"iBGP", Session{LocalASN: 65530, Peer: sdk.Peer{ASN: 65530, Multihop: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.EBGPMultiHop(); got != tc.want {
				t.Errorf("EBGPMultiHop() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTimersFrom(t *testing.T) {
	for _, tc := range []struct {
		params  map[string]string
		want    Timers
		wantErr string
	}{
		{params: nil},
		{params: map[string]string{"holdTime": "9s", "keepaliveTime": "3s"}, want: Timers{Hold: 9, Keepalive: 3}},
		{params: map[string]string{"holdTime": "3m"}, want: Timers{Hold: 180}},
		{params: map[string]string{"keepaliveTime": "30s"}, want: Timers{Keepalive: 30}},
		{params: map[string]string{"holdTime": "2s"}, wantErr: "holdTime 2s is out of range; use 3s to 65535s"},
		{params: map[string]string{"holdTime": "0s"}, wantErr: `holdTime "0s" is not a whole number of seconds`},
		{params: map[string]string{"holdTime": "1500ms"}, wantErr: `holdTime "1500ms" is not a whole number of seconds; write it as 9s or 1m`},
		{params: map[string]string{"holdTime": "nine"}, wantErr: `holdTime "nine" is not a whole number of seconds`},
		{params: map[string]string{"holdTime": "9s", "keepaliveTime": "9s"}, wantErr: "keepaliveTime 9s must be shorter than the hold time (9s)"},
		{params: map[string]string{"keepaliveTime": "90s"}, wantErr: "keepaliveTime 90s must be shorter than the hold time (90s)"},
	} {
		got, err := TimersFrom(sdk.Options{Params: tc.params})
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%v: got %+v, %v; want %+v", tc.params, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: got %v, want an error containing %q", tc.params, err, tc.wantErr)
		}
	}
}

func TestBFDFrom(t *testing.T) {
	for _, tc := range []struct {
		params  map[string]string
		want    BFD
		wantErr string
	}{
		{params: nil},
		{params: map[string]string{"bfdInterval": "300ms"}, want: BFD{IntervalMs: 300, Multiplier: 3}},
		{params: map[string]string{"bfdInterval": "1s", "bfdMultiplier": "5"}, want: BFD{IntervalMs: 1000, Multiplier: 5}},
		{params: map[string]string{"bfdInterval": "10ms", "bfdMultiplier": "2"}, want: BFD{IntervalMs: 10, Multiplier: 2}},
		{params: map[string]string{"bfdInterval": "60s", "bfdMultiplier": "255"}, want: BFD{IntervalMs: 60000, Multiplier: 255}},
		{params: map[string]string{"bfdInterval": "9ms"}, wantErr: "bfdInterval 9ms is out of range; use 10ms to 60s"},
		{params: map[string]string{"bfdInterval": "61s"}, wantErr: "bfdInterval 61s is out of range"},
		{params: map[string]string{"bfdInterval": "0s"}, wantErr: "bfdInterval 0s is out of range"},
		{params: map[string]string{"bfdInterval": "300"}, wantErr: `bfdInterval "300" is not a whole number of milliseconds; write it as 300ms or 1s`},
		{params: map[string]string{"bfdInterval": "300.5ms"}, wantErr: `bfdInterval "300.5ms" is not a whole number of milliseconds`},
		{params: map[string]string{"bfdMultiplier": "3"}, wantErr: "bfdMultiplier 3 is set without bfdInterval; set bfdInterval"},
		{params: map[string]string{"bfdInterval": "300ms", "bfdMultiplier": "1"}, wantErr: `bfdMultiplier "1" is out of range; use a whole number from 2 to 255`},
		{params: map[string]string{"bfdInterval": "300ms", "bfdMultiplier": "three"}, wantErr: `bfdMultiplier "three" is out of range`},
	} {
		got, err := BFDFrom(sdk.Options{Params: tc.params})
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%v: got %+v, %v; want %+v", tc.params, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: got %v, want an error containing %q", tc.params, err, tc.wantErr)
		}
	}
}
