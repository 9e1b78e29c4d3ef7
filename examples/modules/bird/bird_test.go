package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
)

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		params   map[string]string
		wantNS   string
		wantName string
		wantErr  string
	}{
		{name: "namespace only", params: map[string]string{"namespace": "bird"}, wantNS: "bird", wantName: "bird"},
		{name: "name override", params: map[string]string{"namespace": "net", "name": "bird.peers"}, wantNS: "net", wantName: "bird.peers"},
		{name: "no options", wantErr: "add ?namespace=<ns>"},
		{name: "empty namespace", params: map[string]string{"namespace": ""}, wantErr: "add ?namespace=<ns>"},
		{name: "invalid namespace", params: map[string]string{"namespace": "Bird_NS"}, wantErr: `namespace="Bird_NS", which is not a valid namespace name`},
		{name: "invalid name", params: map[string]string{"namespace": "bird", "name": "-x"}, wantErr: `name="-x", which is not a valid ConfigMap name`},
		{name: "typo", params: map[string]string{"nampespace": "bird"}, wantErr: `does not know the option "nampespace"`},
		{name: "BGP timers and BFD", params: map[string]string{"namespace": "bird", "holdTime": "9s", "keepaliveTime": "3s", "bfdInterval": "300ms", "bfdMultiplier": "5"}, wantNS: "bird", wantName: "bird"},
		{name: "bad option value", params: map[string]string{"namespace": "bird", "holdTime": "1s"}, wantErr: "holdTime 1s is out of range; use 3s to 65535s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := describe(sdk.Options{Params: tc.params})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("describe error = %v, want one containing %q", err, tc.wantErr)
				}
				if _, gerr := generate(sdk.GenerateRequest{Options: sdk.Options{Params: tc.params}}); gerr == nil || gerr.Error() != err.Error() {
					t.Fatalf("generate error = %v, want describe's %v", gerr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := []sdk.ObjectKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: tc.wantNS}}
			if !reflect.DeepEqual(d.Emits, want) || len(d.Reads) != 0 || d.NodeAnnotations {
				t.Fatalf("describe = %+v, want exactly %+v and no reads or node annotations", d, want)
			}
			resp, err := generate(sdk.GenerateRequest{Options: sdk.Options{Params: tc.params}})
			if err != nil {
				t.Fatal(err)
			}
			o := resp.Objects[0]
			if o.APIVersion() != "v1" || o.Kind() != "ConfigMap" || o.Namespace() != tc.wantNS || o.Name() != tc.wantName {
				t.Fatalf("emitted %s %s %s/%s, want v1 ConfigMap %s/%s", o.APIVersion(), o.Kind(), o.Namespace(), o.Name(), tc.wantNS, tc.wantName)
			}
			if got := o.Labels(); !reflect.DeepEqual(got, map[string]string{appLabel: "bird"}) {
				t.Fatalf("labels = %v", got)
			}
		})
	}
}

// TestGenerate checks the rendered configuration case by case: which keys
// exist, what each must and must not contain.
func TestGenerate(t *testing.T) {
	twoPeers := node("worker-1", "10.66.0.1", "169.254.255.2", "169.254.255.1")
	for _, tc := range []struct {
		name     string
		services []sdk.Service
		nodes    []sdk.Node
		wantKeys []string
		// contains/excludes are per key, in order for contains: each
		// string must appear after the previous one.
		contains map[string][]string
		excludes map[string][]string
		warnings []string
	}{
		{
			name:     "no nodes, no services",
			wantKeys: []string{ServicesKey},
			contains: map[string][]string{ServicesKey: {"protocol static ccm_services {\n\tipv4;\n}", "filter ccm_export {\n\treject;\n}"}},
			excludes: map[string][]string{ServicesKey: {"route ", "net ~"}},
		},
		{
			name:     "no peers",
			services: []sdk.Service{svc("default", "nginx", "145.40.1.5", "")},
			nodes:    []sdk.Node{node("worker-1", "10.66.0.1")},
			wantKeys: []string{ServicesKey, "worker-1.conf"},
			contains: map[string][]string{"worker-1.conf": {"router id 10.66.0.1;", "protocol device {", `include "ccm_services.conf";`, "# This node has no BGP peers yet."}},
			excludes: map[string][]string{"worker-1.conf": {"protocol bgp", "password"}},
		},
		{
			name:     "two peers in order of address, with local and neighbour ASN, source and password",
			nodes:    []sdk.Node{twoPeers},
			wantKeys: []string{ServicesKey, "worker-1.conf"},
			contains: map[string][]string{"worker-1.conf": {
				"protocol bgp peer_169_254_255_1 {",
				"\tlocal 10.66.0.1 as 65000;\n\tneighbor 169.254.255.1 as 65530;\n\tmultihop 2;\n\tpassword \"" + fakePassword + "\";",
				"\t\timport none;\n\t\texport filter ccm_export;",
				"protocol bgp peer_169_254_255_2 {",
				"\tneighbor 169.254.255.2 as 65530;",
			}},
			excludes: map[string][]string{ServicesKey: {fakePassword}},
		},
		{
			name:     "peer without password",
			nodes:    []sdk.Node{{Name: "w", LocalASN: 64512, SourceIP: "10.0.0.1", Peers: []sdk.Peer{{ASN: 64513, IP: "10.0.0.2"}}}},
			wantKeys: []string{ServicesKey, "w.conf"},
			contains: map[string][]string{"w.conf": {"local 10.0.0.1 as 64512;", "neighbor 10.0.0.2 as 64513;"}},
			// Nor multihop: a peer the neighbour data does not call
			// multihop is a direct one, BIRD's default.
			excludes: map[string][]string{"w.conf": {"password", "multihop"}},
		},
		{
			name: "several services sorted numerically, one route each",
			services: []sdk.Service{
				svc("shop", "web", "145.40.1.9", ""),
				svc("default", "nginx", "145.40.1.10", ""),
				svc("ai", "trainer", "145.40.1.6", ""),
			},
			nodes:    []sdk.Node{twoPeers},
			wantKeys: []string{ServicesKey, "worker-1.conf"},
			contains: map[string][]string{ServicesKey: {
				"route 145.40.1.6/32 blackhole; # ai/trainer\n",
				"route 145.40.1.9/32 blackhole; # shop/web\n",
				"route 145.40.1.10/32 blackhole; # default/nginx\n",
				"if net ~ [\n\t\t145.40.1.6/32,\n\t\t145.40.1.9/32,\n\t\t145.40.1.10/32\n\t] then accept;\n\treject;",
			}},
		},
		{
			name: "shared IP is announced once, naming both Services",
			services: []sdk.Service{
				svc("kube-system", "dns-udp", "145.40.1.7", "dns", udp(53)),
				svc("kube-system", "dns-tcp", "145.40.1.7", "dns", tcp(53)),
			},
			wantKeys: []string{ServicesKey},
			contains: map[string][]string{ServicesKey: {
				"(1).",
				"\troute 145.40.1.7/32 blackhole; # kube-system/dns-tcp, kube-system/dns-udp\n}",
				"if net ~ [\n\t\t145.40.1.7/32\n\t] then accept;",
			}},
		},
		{
			name: "IPv6 and garbage addresses are warnings, the rest is announced",
			services: []sdk.Service{
				svc("default", "v6", "2604:1380::1", ""),
				svc("default", "bad", "not-an-ip", ""),
				svc("default", "ok", "145.40.1.5", ""),
			},
			wantKeys: []string{ServicesKey},
			contains: map[string][]string{ServicesKey: {"route 145.40.1.5/32 blackhole; # default/ok"}},
			excludes: map[string][]string{ServicesKey: {"2604", "not-an-ip"}},
			warnings: []string{
				`Service default/bad has the address "not-an-ip", which is not an IP address; it is not announced`,
				"Service default/v6 has the address 2604:1380::1; this module announces IPv4 only, so it is not announced",
			},
		},
		{
			name: "a node with bad data is skipped with a warning, the others keep their config",
			nodes: []sdk.Node{
				twoPeers,
				{Name: "no-src", LocalASN: 65000, Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1"}}},
				{Name: "no-asn", SourceIP: "10.66.0.3"},
				{Name: "bad-peer", LocalASN: 65000, SourceIP: "10.66.0.4", Peers: []sdk.Peer{{ASN: 65530, IP: "not-an-ip"}}},
				// IPv6 peers are left out, not refused: the node keeps its
				// IPv4 sessions.
				{Name: "dual", LocalASN: 65000, SourceIP: "10.66.0.8", SourceIPv6: "2604:1380::8",
					Peers: []sdk.Peer{{ASN: 65530, IP: "fc00::e"}, {ASN: 65530, IP: "169.254.255.1"}}},
				{Name: "peer-no-asn", LocalASN: 65000, SourceIP: "10.66.0.4", Peers: []sdk.Peer{{IP: "169.254.255.1"}}},
				{Name: "dup-peer", LocalASN: 65000, SourceIP: "10.66.0.5", Peers: []sdk.Peer{{ASN: 1, IP: "169.254.255.1"}, {ASN: 1, IP: "169.254.255.1"}}},
				{Name: "quote", LocalASN: 65000, SourceIP: "10.66.0.6", Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1", Password: `pa"ss`}}},
				{Name: "newline", LocalASN: 65000, SourceIP: "10.66.0.7", Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1", Password: "pa\nss"}}},
			},
			wantKeys: []string{ServicesKey, "worker-1.conf", "dual.conf"},
			contains: map[string][]string{"dual.conf": {"neighbor 169.254.255.1 as 65530;"}},
			excludes: map[string][]string{"dual.conf": {"fc00", "2604"}},
			warnings: []string{
				`node bad-peer gets no BIRD configuration: its peer address "not-an-ip" is not an IPv4 address`,
				"node dup-peer gets no BIRD configuration: it lists the peer 169.254.255.1 twice",
				"node newline gets no BIRD configuration: the BGP password of its peer 169.254.255.1 contains a double quote, a line break or a NUL, which a BIRD configuration cannot hold; set a password without them",
				"node no-asn gets no BIRD configuration: it has no local ASN",
				`node no-src gets no BIRD configuration: its BGP source address "" is not an IPv4 address`,
				"node peer-no-asn gets no BIRD configuration: its peer 169.254.255.1 has no ASN",
				"node quote gets no BIRD configuration: the BGP password of its peer 169.254.255.1 contains a double quote, a line break or a NUL, which a BIRD configuration cannot hold; set a password without them",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := generate(sdk.GenerateRequest{Options: birdOptions, Services: tc.services, Nodes: tc.nodes})
			if err != nil {
				t.Fatal(err)
			}
			data := configMapData(t, resp)
			var keys []string
			for k := range data {
				keys = append(keys, k)
			}
			if !sameSet(keys, tc.wantKeys) {
				t.Fatalf("keys = %v, want %v", keys, tc.wantKeys)
			}
			for key, wants := range tc.contains {
				rest := data[key]
				for _, w := range wants {
					i := strings.Index(rest, w)
					if i < 0 {
						t.Fatalf("%s lacks %q (or has it out of order):\n%s", key, w, data[key])
					}
					rest = rest[i+len(w):]
				}
			}
			for key, bad := range tc.excludes {
				for _, b := range bad {
					if strings.Contains(data[key], b) {
						t.Errorf("%s contains %q:\n%s", key, b, data[key])
					}
				}
			}
			if !reflect.DeepEqual(resp.Warnings, tc.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", resp.Warnings, tc.warnings)
			}
		})
	}
}

// TestBGPOptions: the BGP timers and BFD the CCM passes as options are
// checked with the CCM's ranges, refused with a message naming the option,
// the value and what to write, and rendered into every node's sessions in
// syntax the real BIRD parser accepts.
func TestBGPOptions(t *testing.T) {
	bird, _ := exec.LookPath("bird")
	for _, tc := range bgpOptionCases() {
		t.Run(tc.name, func(t *testing.T) {
			c := goldenCase{req: sdk.GenerateRequest{Nodes: []sdk.Node{node("worker-1", "10.66.0.1", "169.254.255.2", "169.254.255.1")}}, params: tc.params}
			_, derr := describe(c.options())
			resp, err := generate(withOptions(c))
			if tc.wantErr != "" {
				if derr == nil || derr.Error() != tc.wantErr {
					t.Fatalf("describe error = %v, want %q", derr, tc.wantErr)
				}
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("generate error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if derr != nil || err != nil {
				t.Fatalf("describe error %v, generate error %v", derr, err)
			}
			data := configMapData(t, resp)
			conf := data["worker-1.conf"]
			rest := conf
			for _, w := range tc.contains {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("worker-1.conf lacks %q (or has it out of order):\n%s", w, conf)
				}
				rest = rest[i+len(w):]
			}
			for _, b := range tc.excludes {
				if strings.Contains(conf, b) {
					t.Errorf("worker-1.conf contains %q:\n%s", b, conf)
				}
			}
			if n := strings.Count(conf, "protocol bfd {"); n > 1 {
				t.Errorf("worker-1.conf has %d BFD protocols, want at most one:\n%s", n, conf)
			}
			// Without bird, TestBIRDParses says it was skipped.
			if bird != "" {
				birdParse(t, bird, data)
			}
		})
	}
}

// bgpOptionCase is one case of TestBGPOptions: the options besides
// namespace, and either what worker-1.conf (two multihop peers) contains,
// in order, and excludes, or the whole error message.
type bgpOptionCase struct {
	name               string
	params             map[string]string
	contains, excludes []string
	wantErr            string
}

func bgpOptionCases() []bgpOptionCase {
	bgp1, bgp2 := "protocol bgp peer_169_254_255_1 {", "protocol bgp peer_169_254_255_2 {"
	bfdBlock := func(ms, mult int) string {
		o := fmt.Sprintf("min rx interval %d ms; min tx interval %d ms; multiplier %d;", ms, ms, mult)
		return "protocol bfd {\n\tinterface \"*\" { " + o + " };\n\tmultihop { " + o + " };\n}\n"
	}
	return []bgpOptionCase{
		{name: "holdTime", params: map[string]string{"holdTime": "9s"},
			contains: []string{bgp1, "\tpassword \"" + fakePassword + "\";\n\thold time 9;\n\tipv4 {", bgp2, "\thold time 9;\n"},
			excludes: []string{"keepalive", "bfd"}},
		{name: "holdTime lowest", params: map[string]string{"holdTime": "3s"}, contains: []string{"\thold time 3;\n"}},
		{name: "holdTime highest", params: map[string]string{"holdTime": "65535s"}, contains: []string{"\thold time 65535;\n"}},
		{name: "holdTime in minutes", params: map[string]string{"holdTime": "1m30s"}, contains: []string{"\thold time 90;\n"}},
		{name: "keepaliveTime", params: map[string]string{"keepaliveTime": "3s"},
			contains: []string{bgp1, "\tkeepalive time 3;\n\tipv4 {", bgp2, "\tkeepalive time 3;\n"},
			excludes: []string{"hold time", "bfd"}},
		{name: "keepaliveTime alone, below the default hold time", params: map[string]string{"keepaliveTime": "89s"}, contains: []string{"\tkeepalive time 89;\n"}},
		{name: "both timers", params: map[string]string{"holdTime": "9s", "keepaliveTime": "3s"},
			contains: []string{bgp1, "\thold time 9;\n\tkeepalive time 3;\n\tipv4 {", bgp2, "\thold time 9;\n\tkeepalive time 3;\n"}},
		{name: "bfdInterval, default multiplier", params: map[string]string{"bfdInterval": "300ms"},
			contains: []string{`include "ccm_services.conf";`, bfdBlock(300, 3), bgp1, "\tbfd on;\n\tipv4 {", bgp2, "\tbfd on;\n"},
			excludes: []string{"hold time", "keepalive"}},
		{name: "bfdInterval lowest, bfdMultiplier lowest", params: map[string]string{"bfdInterval": "10ms", "bfdMultiplier": "2"}, contains: []string{bfdBlock(10, 2)}},
		{name: "bfdInterval highest, bfdMultiplier highest", params: map[string]string{"bfdInterval": "60s", "bfdMultiplier": "255"}, contains: []string{bfdBlock(60000, 255)}},
		{name: "bfdInterval in seconds", params: map[string]string{"bfdInterval": "1s"}, contains: []string{bfdBlock(1000, 3)}},
		{name: "all four", params: map[string]string{"holdTime": "9s", "keepaliveTime": "3s", "bfdInterval": "300ms", "bfdMultiplier": "5"},
			contains: []string{bfdBlock(300, 5), bgp1, "\thold time 9;\n\tkeepalive time 3;\n\tbfd on;\n\tipv4 {", bgp2, "\thold time 9;\n\tkeepalive time 3;\n\tbfd on;\n"}},

		{name: "holdTime without unit", params: map[string]string{"holdTime": "9"}, wantErr: `holdTime "9" is not a whole number of seconds; write it as 9s or 1m`},
		{name: "holdTime fraction", params: map[string]string{"holdTime": "9.5s"}, wantErr: `holdTime "9.5s" is not a whole number of seconds; write it as 9s or 1m`},
		{name: "holdTime too short", params: map[string]string{"holdTime": "2s"}, wantErr: "holdTime 2s is out of range; use 3s to 65535s"},
		{name: "holdTime zero", params: map[string]string{"holdTime": "0s"}, wantErr: "holdTime 0s is out of range; use 3s to 65535s"},
		{name: "holdTime too long", params: map[string]string{"holdTime": "65536s"}, wantErr: "holdTime 65536s is out of range; use 3s to 65535s"},
		{name: "keepaliveTime garbage", params: map[string]string{"keepaliveTime": "often"}, wantErr: `keepaliveTime "often" is not a whole number of seconds; write it as 9s or 1m`},
		{name: "keepaliveTime zero", params: map[string]string{"keepaliveTime": "0s"}, wantErr: "keepaliveTime 0s is out of range; use at least 1s and less than the hold time (90s), at most a third of it"},
		{name: "keepaliveTime equal to holdTime", params: map[string]string{"holdTime": "9s", "keepaliveTime": "9s"}, wantErr: "keepaliveTime 9s is out of range; use at least 1s and less than the hold time (9s), at most a third of it"},
		{name: "keepaliveTime alone, at the default hold time", params: map[string]string{"keepaliveTime": "90s"}, wantErr: "keepaliveTime 90s is out of range; use at least 1s and less than the hold time (90s), at most a third of it"},
		{name: "bfdInterval without unit", params: map[string]string{"bfdInterval": "300"}, wantErr: `bfdInterval "300" is not a whole number of milliseconds; write it as 300ms or 1s`},
		{name: "bfdInterval fraction", params: map[string]string{"bfdInterval": "1.5ms"}, wantErr: `bfdInterval "1.5ms" is not a whole number of milliseconds; write it as 300ms or 1s`},
		{name: "bfdInterval too short", params: map[string]string{"bfdInterval": "5ms"}, wantErr: "bfdInterval 5ms is out of range; use 10ms to 60s"},
		{name: "bfdInterval too long", params: map[string]string{"bfdInterval": "61s"}, wantErr: "bfdInterval 61s is out of range; use 10ms to 60s"},
		{name: "bfdMultiplier without bfdInterval", params: map[string]string{"bfdMultiplier": "3"}, wantErr: "bfdMultiplier 3 is set without bfdInterval; set bfdInterval (for example 300ms) to turn BFD on"},
		{name: "bfdMultiplier too small", params: map[string]string{"bfdInterval": "300ms", "bfdMultiplier": "1"}, wantErr: `bfdMultiplier "1" is out of range; use a whole number from 2 to 255`},
		{name: "bfdMultiplier too large", params: map[string]string{"bfdInterval": "300ms", "bfdMultiplier": "256"}, wantErr: `bfdMultiplier "256" is out of range; use a whole number from 2 to 255`},
		{name: "bfdMultiplier not a number", params: map[string]string{"bfdInterval": "300ms", "bfdMultiplier": "three"}, wantErr: `bfdMultiplier "three" is out of range; use a whole number from 2 to 255`},
		{name: "unknown option", params: map[string]string{"bfdMultipler": "3"}, wantErr: `does not know the option "bfdMultipler"; it takes namespace=<ns> (required), name=<configmap> (default bird), holdTime and keepaliveTime (whole seconds, for example 9s and 3s), bfdInterval (whole milliseconds, for example 300ms) and bfdMultiplier (2 to 255)`},
	}
}

// TestNoBGPOptionsUnchanged: options set but empty (as a URL with
// holdTime= gives) change nothing; the golden files pin the output
// without them byte for byte.
func TestNoBGPOptionsUnchanged(t *testing.T) {
	for _, c := range goldenCases() {
		if c.params != nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			want, err := handle(t, c.options(), c.req)
			if err != nil {
				t.Fatal(err)
			}
			c.params = map[string]string{ParamHoldTime: "", ParamKeepaliveTime: "", ParamBFDInterval: "", ParamBFDMultiplier: ""}
			got, err := handle(t, c.options(), c.req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("empty options changed the output:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestBFDWithoutPeers: BFD is per node, so a node without peers yet gets
// its BFD protocol too (idle until BGP asks it for sessions).
func TestBFDWithoutPeers(t *testing.T) {
	c := goldenCase{req: sdk.GenerateRequest{Nodes: []sdk.Node{node("worker-1", "10.66.0.1")}}, params: timersAndBFD}
	resp, err := generate(withOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	conf := configMapData(t, resp)["worker-1.conf"]
	if !strings.Contains(conf, "protocol bfd {") || strings.Contains(conf, "protocol bgp") || !strings.Contains(conf, "# This node has no BGP peers yet.") {
		t.Fatalf("worker-1.conf:\n%s", conf)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			return false
		}
	}
	return true
}

// TestPasswordOnlyInConfig: the password reaches the node's configuration
// and nothing else the module produces: not the shared file, the metadata,
// a warning or an error, even for a password the module refuses.
func TestPasswordOnlyInConfig(t *testing.T) {
	refused := `refused"` + fakePassword
	req := sdk.GenerateRequest{
		Services: fixtureServices(),
		Nodes: append(fixtureNodes(), sdk.Node{Name: "worker-3", LocalASN: 65000, SourceIP: "10.66.0.3",
			Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1", Password: sdk.Secret(refused)}}}),
	}
	out, err := handle(t, birdOptions, req)
	if err != nil {
		t.Fatal(err)
	}
	var resp sdk.GenerateResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	data := configMapData(t, resp)
	for key, conf := range data {
		want := 0
		if key == "worker-1.conf" || key == "worker-2.conf" {
			want = 2 // one per peer
		}
		if got := strings.Count(conf, fakePassword); got != want {
			t.Errorf("%s holds the password %d times, want %d", key, got, want)
		}
	}
	delete(resp.Objects[0], "data")
	rest, _ := json.Marshal(resp)
	if bytes.Contains(rest, []byte(fakePassword)) {
		t.Errorf("the password is outside the ConfigMap data: %s", rest)
	}

	// An error path: the size limit, with passwords in the request.
	big := sdktest.Snapshot(40000, 2)
	_, err = generate(sdk.GenerateRequest{Options: birdOptions, Services: big.Services, Nodes: big.Nodes})
	if err == nil {
		t.Fatal("40,000 addresses fit in one ConfigMap; want the size error")
	}
	if strings.Contains(err.Error(), "fake-bgp-password") {
		t.Errorf("the error carries the password: %v", err)
	}
}

// TestSizeLimit: a configuration the API server would refuse is an error
// that says what to do, and nothing is emitted.
func TestSizeLimit(t *testing.T) {
	big := sdktest.Snapshot(40000, 3)
	resp, err := generate(sdk.GenerateRequest{Options: birdOptions, Services: big.Services, Nodes: big.Nodes})
	if err == nil || !strings.Contains(err.Error(), "over the 1 MiB a ConfigMap holds") || !strings.Contains(err.Error(), "(3 nodes, 40000 addresses) into ConfigMap bird/bird") {
		t.Fatalf("error = %v, want the ConfigMap size error", err)
	}
	if len(resp.Objects) != 0 {
		t.Fatalf("emitted %d objects alongside the error", len(resp.Objects))
	}
	// A realistic large cluster fits: 2,000 Services on 100 nodes.
	ok := sdktest.Snapshot(2000, 100)
	if _, err := generate(sdk.GenerateRequest{Options: birdOptions, Services: ok.Services, Nodes: ok.Nodes}); err != nil {
		t.Fatalf("2,000 Services on 100 nodes: %v", err)
	}
}

// TestPure: shuffled input (the host sorts, but a module must not rely on
// it) gives byte-identical output through the JSON path the Wasm export uses.
func TestPure(t *testing.T) {
	base := sdk.GenerateRequest{Services: fixtureServices(), Nodes: fixtureNodes()}
	want, err := handle(t, birdOptions, base)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		req := sdk.GenerateRequest{Services: rotate(fixtureServices(), i), Nodes: rotate(fixtureNodes(), i)}
		for j := range req.Nodes {
			req.Nodes[j].Peers = rotate(req.Nodes[j].Peers, i+j)
		}
		got, err := handle(t, birdOptions, req)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("rotation %d changed the output:\n%s\nwant\n%s", i, got, want)
		}
	}
}

func rotate[T any](s []T, n int) []T {
	if len(s) == 0 {
		return s
	}
	n %= len(s)
	return append(append([]T(nil), s[n:]...), s[:n]...)
}

func TestProtocolName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"169.254.255.1", "peer_169_254_255_1"},
		{"10.0.0.2", "peer_10_0_0_2"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := protocolName(mustAddr(t, tc.in))
			if got != tc.want {
				t.Fatalf("protocolName(%s) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		in               string
		label, subdomain bool
	}{
		{"bird", true, true},
		{"bird-system", true, true},
		{"a.b", false, true},
		{"-a", false, false},
		{"a-", false, false},
		{"A", false, false},
		{"a_b", false, false},
		{"", false, false},
		{strings.Repeat("a", 63), true, true},
		{strings.Repeat("a", 64), false, false},
		{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63), false, true},
	} {
		t.Run(fmt.Sprintf("%.20s", tc.in), func(t *testing.T) {
			if got := isDNSLabel(tc.in); got != tc.label {
				t.Errorf("isDNSLabel(%q) = %v", tc.in, got)
			}
			if got := isDNSSubdomain(tc.in); got != tc.subdomain {
				t.Errorf("isDNSSubdomain(%q) = %v", tc.in, got)
			}
		})
	}
}
