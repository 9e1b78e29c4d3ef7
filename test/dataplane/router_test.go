package dataplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMetrosPolicy: the routers' import policy is in the configuration
// for each metro, with its nodes and its block and any prefix in it.
func TestMetrosPolicy(t *testing.T) {
	if metroPolicy(nil) != "" {
		t.Error("a policy without metros")
	}
	m := Metros(map[string][]string{"sv": {"203.0.113.3"}, "da": {"198.51.100.4", "198.51.100.2"}, "ny": {"192.0.2.1"}},
		map[string]string{"da": "198.18.0.0/18", "sv": "198.18.64.0/18"})
	want := []MetroRoutes{
		{Code: "da", Nodes: []string{"198.51.100.2", "198.51.100.4"}, Blocks: []string{"198.18.0.0/18"}},
		{Code: "ny", Nodes: []string{"192.0.2.1"}},
		{Code: "sv", Nodes: []string{"203.0.113.3"}, Blocks: []string{"198.18.64.0/18"}},
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("Metros = %v, want %v", m, want)
	}
	p := metroPolicy(m)
	for _, s := range []string{
		`default-import-policy = "reject-route"`,
		`neighbor-info-list = ["198.51.100.2", "198.51.100.4"]`,
		`ip-prefix = "198.18.64.0/18"` + "\n" + `    masklength-range = "18..32"`,
	} {
		if !strings.Contains(p, s) {
			t.Errorf("the policy lacks %q:\n%s", s, p)
		}
	}
}

// TestMetrosPolicyIPv6: a metro with an IPv6 block gets a prefix set of
// its own for it (GoBGP keeps a set to one family), up to /128, and its
// own statement; the IPv4 set is as before.
func TestMetrosPolicyIPv6(t *testing.T) {
	m := Metros(map[string][]string{"da": {"198.51.100.2", "2001:db8:100::1"}},
		map[string]string{"da": "198.18.0.0/18"}, map[string]string{"da": "2001:db8:100::/48"})
	want := []MetroRoutes{{Code: "da", Nodes: []string{"198.51.100.2", "2001:db8:100::1"}, Blocks: []string{"198.18.0.0/18", "2001:db8:100::/48"}}}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("Metros = %v, want %v", m, want)
	}
	p := metroPolicy(m)
	for _, s := range []string{
		`neighbor-info-list = ["198.51.100.2", "2001:db8:100::1"]`,
		`prefix-set-name = "eips-da"` + "\n" + `  [[defined-sets.prefix-sets.prefix-list]]` + "\n" + `    ip-prefix = "198.18.0.0/18"` + "\n" + `    masklength-range = "18..32"`,
		`prefix-set-name = "eips6-da"` + "\n" + `  [[defined-sets.prefix-sets.prefix-list]]` + "\n" + `    ip-prefix = "2001:db8:100::/48"` + "\n" + `    masklength-range = "48..128"`,
		`prefix-set = "eips6-da"`,
	} {
		if !strings.Contains(p, s) {
			t.Errorf("the policy lacks %q:\n%s", s, p)
		}
	}
}

// TestRouterIPv6Sessions: a router with an IPv6 address listens on both
// and has one IPv6 neighbour per node's IPv6, carrying IPv6 unicast; every
// neighbour is multihop, as the nodes are behind the gateway.
func TestRouterIPv6Sessions(t *testing.T) {
	conf := routerConfig(RouterOptions{Name: "r", Addr: "169.254.255.1", Addr6: "fc00::e",
		Neighbors: []string{"198.51.100.2"}, Neighbors6: []string{"2001:db8:100::1"}, PeerASN: ProjectASN, ASN: RouterASN})
	for _, s := range []string{
		`local-address-list = ["169.254.255.1", "fc00::e"]`,
		`neighbor-address = "2001:db8:100::1"` + "\n" + `    peer-as = 65000` + "\n" + `  [[neighbors.afi-safis]]` + "\n" + `    [neighbors.afi-safis.config]` + "\n" + `      afi-safi-name = "ipv6-unicast"` + "\n" + `  [neighbors.ebgp-multihop.config]` + "\n" + `    enabled = true` + "\n" + `    multihop-ttl = 255` + "\n" + `  [neighbors.transport.config]` + "\n" + `    passive-mode = true` + "\n" + `    local-address = "fc00::e"`,
		`neighbor-address = "198.51.100.2"` + "\n" + `    peer-as = 65000` + "\n" + `  [neighbors.ebgp-multihop.config]` + "\n" + `    enabled = true` + "\n" + `    multihop-ttl = 255` + "\n" + `  [neighbors.transport.config]` + "\n" + `    passive-mode = true` + "\n" + `    local-address = "169.254.255.1"`,
	} {
		if !strings.Contains(conf, s) {
			t.Errorf("the configuration lacks %q:\n%s", s, conf)
		}
	}
}

// TestMetrosPolicyInGoBGP runs gobgpd (from $METAL_CCM_E2E_GOBGP, which
// make e2e builds) on loopback ports, as a router with two neighbours in
// two metros that both announce an address of each metro: the router
// holds each address from its metro's neighbour only, as Equinix's would.
func TestMetrosPolicyInGoBGP(t *testing.T) {
	dir := os.Getenv(EnvGoBGP)
	if dir == "" {
		t.Skipf("%s is not set (make e2e builds GoBGP and sets it)", EnvGoBGP)
	}
	bins := Binaries{GoBGPD: filepath.Join(dir, "gobgpd"), GoBGP: filepath.Join(dir, "gobgp")}
	work := t.TempDir()
	const port = 21179
	da, sv := "127.0.0.2", "127.0.0.3"
	metros := Metros(map[string][]string{"da": {da}, "sv": {sv}}, map[string]string{"da": "198.18.0.0/18", "sv": "198.18.64.0/18"})
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = \"127.0.0.1\"\n  port = %d\n  local-address-list = [\"127.0.0.1\"]\n", RouterASN, port)
	for _, n := range []string{da, sv} {
		fmt.Fprintf(&b, "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n  [neighbors.transport.config]\n    passive-mode = true\n    local-address = \"127.0.0.1\"\n", n, ProjectASN)
	}
	b.WriteString(metroPolicy(metros))
	router, err := StartGoBGP(bins, work, RouterOptions{Name: "router", APIPort: port + 1}, b.String())
	if err != nil {
		t.Fatal(err)
	}
	defer router.Stop()
	for i, addr := range []string{da, sv} {
		conf := fmt.Sprintf("[global.config]\n  as = %d\n  router-id = %q\n  port = -1\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"127.0.0.1\"\n    peer-as = %d\n  [neighbors.transport.config]\n    local-address = %q\n    remote-port = %d\n", ProjectASN, addr, RouterASN, addr, port)
		sp, err := StartGoBGP(bins, work, RouterOptions{Name: fmt.Sprintf("speaker-%d", i), APIPort: port + 2 + i}, conf)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Stop()
		for _, p := range []string{"198.18.0.5/32", "198.18.64.5/32"} {
			if err := sp.Announce(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string][]string{"198.18.0.5/32": {da}, "198.18.64.5/32": {sv}}
	var got Routes
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got, err = router.Routes(context.Background()); err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got.NextHops("198.18.0.5/32"), want["198.18.0.5/32"]) && slices.Equal(got.NextHops("198.18.64.5/32"), want["198.18.64.5/32"]) {
			break
		}
	}
	// A refused path would have come with the accepted ones (each speaker
	// announces both at once); look once more a moment later.
	time.Sleep(time.Second)
	if got, err = router.Routes(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p, hops := range want {
		if !slices.Equal(got.NextHops(p), hops) {
			t.Errorf("%s via %v, want %v only", p, got.NextHops(p), hops)
		}
	}
}
