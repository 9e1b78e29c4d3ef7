package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// RouterOptions describe one GoBGP router standing in for an Equinix Metal
// router: it listens on Addr and accepts sessions only from the configured
// neighbours, with their ASN and the project's MD5 password.
type RouterOptions struct {
	Name     string
	Addr     string // the peer address the emulator's neighbour data names
	ASN      uint32 // the emulator's peer_as
	APIPort  int    // gobgpd's gRPC API on 127.0.0.1
	Password string // "" for none; with one, a neighbour without it never comes up
	// Neighbors are the nodes' private addresses; each must speak PeerASN.
	Neighbors []string
	PeerASN   uint32
	// Addr6, when set, is the router's IPv6 peer address (fc00::e or
	// fc00::f, Equinix's), where it also accepts IPv6 sessions from
	// Neighbors6, the nodes' public IPv6 addresses: Equinix's IPv6 BGP is a
	// session of its own per node.
	Addr6      string
	Neighbors6 []string
	// Metros, when set, make the router refuse what Equinix's refuse: an
	// Elastic IP is routed only in the metro it is reserved in, so a
	// route from a node is accepted only for an address in the public
	// blocks of the node's metro (of the route's family). A neighbour in no metro's Nodes has every
	// route refused. Without Metros every route is accepted.
	Metros []MetroRoutes
}

// MetroRoutes are a metro's nodes (their BGP source addresses, private
// IPv4 and public IPv6) and the blocks its public addresses, Elastic IPs
// among them, come from (IPv4, IPv6 or both).
type MetroRoutes struct {
	Code   string
	Nodes  []string
	Blocks []string
}

// Router is a running gobgpd.
type Router struct {
	RouterOptions
	proc  *Proc
	cli   string
	netns string // the /proc path of the netns gobgpd runs in; "" is this process's
}

// StartRouter writes the router's configuration and starts gobgpd in the
// routers' namespace, behind the nodes' gateway (gateway.go). The
// neighbours are passive (the routers never dial: MetalLB's native speaker
// does not listen) and multihop, and multipath is on, as on Equinix's
// routers.
func StartRouter(bins Binaries, dir string, o RouterOptions) (*Router, error) {
	g, err := startGateway(dir)
	if err != nil {
		return nil, err
	}
	return startGoBGP(bins, dir, o, routerConfig(o), g.RoutersNetns())
}

// routerConfig is gobgpd's configuration (TOML) for the router.
func routerConfig(o RouterOptions) string {
	var b strings.Builder
	listen := fmt.Sprintf("%q", o.Addr)
	if o.Addr6 != "" {
		listen += fmt.Sprintf(", %q", o.Addr6)
	}
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n  port = 179\n  local-address-list = [%s]\n", o.ASN, o.Addr, listen)
	b.WriteString("[global.use-multiple-paths.config]\n  enabled = true\n")
	neighbor := func(n, local, afiSafi string) {
		fmt.Fprintf(&b, "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n", n, o.PeerASN)
		if o.Password != "" {
			fmt.Fprintf(&b, "    auth-password = %q\n", o.Password)
		}
		if afiSafi != "" {
			fmt.Fprintf(&b, "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = %q\n", afiSafi)
		}
		// The nodes are two hops away (gateway.go): without multihop
		// gobgpd answers eBGP at TTL 1, which the gateway drops.
		b.WriteString("  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = 255\n")
		fmt.Fprintf(&b, "  [neighbors.transport.config]\n    passive-mode = true\n    local-address = %q\n", local)
	}
	for _, n := range o.Neighbors {
		neighbor(n, o.Addr, "")
	}
	if o.Addr6 != "" {
		for _, n := range o.Neighbors6 {
			neighbor(n, o.Addr6, "ipv6-unicast")
		}
	}
	b.WriteString(metroPolicy(o.Metros))
	return b.String()
}

// Metros are the routers' metros from the nodes' addresses by metro code
// and the public blocks by metro code (one map per family), sorted by
// code; a metro without a block gets its nodes' routes refused.
func Metros(nodes map[string][]string, blocks ...map[string]string) []MetroRoutes {
	var out []MetroRoutes
	for _, code := range slices.Sorted(maps.Keys(nodes)) {
		m := MetroRoutes{Code: code, Nodes: slices.Sorted(slices.Values(nodes[code]))}
		for _, family := range blocks {
			if b := family[code]; b != "" {
				m.Blocks = append(m.Blocks, b)
			}
		}
		out = append(out, m)
	}
	return out
}

// metroPolicy is the routers' import policy for metros (see
// RouterOptions.Metros): for each metro a neighbour set of its nodes and,
// per family, a prefix set of its blocks (any prefix within them; GoBGP
// keeps a set to one family), a statement accepting a route that matches
// both, and every other route refused. "" without metros.
func metroPolicy(metros []MetroRoutes) string {
	if len(metros) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("[global.apply-policy.config]\n  import-policy-list = [\"metro-eips\"]\n  default-import-policy = \"reject-route\"\n")
	for _, m := range metros {
		fmt.Fprintf(&b, "[[defined-sets.neighbor-sets]]\n  neighbor-set-name = \"nodes-%s\"\n  neighbor-info-list = [", m.Code)
		for i, n := range m.Nodes {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", n)
		}
		b.WriteString("]\n")
		for _, f := range blockFamilies(m.Blocks) {
			fmt.Fprintf(&b, "[[defined-sets.prefix-sets]]\n  prefix-set-name = \"%s-%s\"\n", f.set, m.Code)
			for _, blk := range f.blocks {
				bits := blk[strings.LastIndex(blk, "/")+1:]
				fmt.Fprintf(&b, "  [[defined-sets.prefix-sets.prefix-list]]\n    ip-prefix = %q\n    masklength-range = \"%s..%d\"\n", blk, bits, f.hostBits)
			}
		}
	}
	b.WriteString("[[policy-definitions]]\n  name = \"metro-eips\"\n")
	for _, m := range metros {
		for _, f := range blockFamilies(m.Blocks) {
			fmt.Fprintf(&b, "  [[policy-definitions.statements]]\n    name = \"metro-%s-%s\"\n", m.Code, f.set)
			fmt.Fprintf(&b, "    [policy-definitions.statements.conditions.match-neighbor-set]\n      neighbor-set = \"nodes-%s\"\n", m.Code)
			fmt.Fprintf(&b, "    [policy-definitions.statements.conditions.match-prefix-set]\n      prefix-set = \"%s-%s\"\n", f.set, m.Code)
			b.WriteString("    [policy-definitions.statements.actions]\n      route-disposition = \"accept-route\"\n")
		}
	}
	return b.String()
}

// blockFamily is a metro's blocks of one family, with the name of their
// prefix set ("eips" for IPv4, "eips6" for IPv6) and the family's host
// prefix length.
type blockFamily struct {
	set      string
	blocks   []string
	hostBits int
}

// blockFamilies splits blocks by family, IPv4 first; an IPv4-only metro
// gives the one set it always had. A metro without blocks still gets an
// empty IPv4 set, which refuses everything from its nodes.
func blockFamilies(blocks []string) []blockFamily {
	v4 := blockFamily{set: "eips", hostBits: 32}
	v6 := blockFamily{set: "eips6", hostBits: 128}
	for _, blk := range blocks {
		if strings.Contains(blk, ":") {
			v6.blocks = append(v6.blocks, blk)
		} else {
			v4.blocks = append(v4.blocks, blk)
		}
	}
	if len(v6.blocks) == 0 {
		return []blockFamily{v4}
	}
	return []blockFamily{v4, v6}
}

// StartGoBGP runs gobgpd with the configuration (TOML) in this process's
// netns (a node's speaker) and waits for its API; o names it and gives its
// API port.
func StartGoBGP(bins Binaries, dir string, o RouterOptions, config string) (*Router, error) {
	return startGoBGP(bins, dir, o, config, "")
}

// startGoBGP is StartGoBGP in the netns at the /proc path netns ("" for
// this process's).
func startGoBGP(bins Binaries, dir string, o RouterOptions, config, netns string) (*Router, error) {
	conf := filepath.Join(dir, o.Name+".toml")
	if err := os.WriteFile(conf, []byte(config), 0o600); err != nil {
		return nil, err
	}
	bin, args := inNetns(netns, bins.GoBGPD, "-f", conf, "--api-hosts", fmt.Sprintf("127.0.0.1:%d", o.APIPort), "-l", "info")
	p, err := Start(dir, o.Name, bin, args, nil)
	if err != nil {
		return nil, err
	}
	r := &Router{RouterOptions: o, proc: p, cli: bins.GoBGP, netns: netns}
	// Ready when the API answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := r.gobgp(context.Background(), "global"); err == nil {
			return r, nil
		}
		if done, err := p.Exited(); done {
			return nil, fmt.Errorf("gobgpd %s exited (%v); see %s", o.Name, err, p.Log)
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("gobgpd %s: API not answering after 30s; see %s", o.Name, p.Log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends gobgpd.
func (r *Router) Stop() { r.proc.Stop() }

// Log is gobgpd's log file.
func (r *Router) Log() string { return r.proc.Log }

func (r *Router) gobgp(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The API listens on the loopback of the router's own netns.
	bin, args := inNetns(r.netns, r.cli, append([]string{"-u", "127.0.0.1", "-p", fmt.Sprint(r.APIPort)}, args...)...)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("gobgp %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Announce originates prefix (a /32) from this instance.
func (r *Router) Announce(ctx context.Context, prefix string) error {
	_, err := r.gobgp(ctx, "global", "rib", "add", "-a", "ipv4", prefix)
	return err
}

// Path is one path a router holds for a prefix.
type Path struct {
	NextHop  string
	ASPath   []uint32
	Neighbor string
}

func (p Path) String() string { return fmt.Sprintf("%s via AS%v", p.NextHop, p.ASPath) }

// Routes is the router's table: prefix -> paths (one per neighbour that
// announced it; with multipath they are all used).
type Routes map[string][]Path

// NextHops of a prefix, sorted.
func (rs Routes) NextHops(prefix string) []string {
	var out []string
	for _, p := range rs[prefix] {
		out = append(out, p.NextHop)
	}
	sort.Strings(out)
	return out
}

// Routes reads the router's table through gobgp's JSON output: IPv4, and
// IPv6 too when the router has IPv6 sessions.
func (r *Router) Routes(ctx context.Context) (Routes, error) {
	families := []string{"ipv4"}
	if r.Addr6 != "" {
		families = append(families, "ipv6")
	}
	all := Routes{}
	for _, f := range families {
		out, err := r.gobgp(ctx, "global", "rib", "-a", f, "-j")
		if err != nil {
			return nil, err
		}
		rs, err := parseRIB(out)
		if err != nil {
			return nil, err
		}
		maps.Copy(all, rs)
	}
	return all, nil
}

// ribPath is the part of gobgp's JSON path we read.
type ribPath struct {
	Attrs []struct {
		Type    int    `json:"type"`
		NextHop string `json:"nexthop"`
		ASPaths []struct {
			ASNs []uint32 `json:"asns"`
		} `json:"as_paths"`
	} `json:"attrs"`
	Neighbor string `json:"neighbor-ip"`
	Withdraw bool   `json:"withdrawal"`
}

func parseRIB(out []byte) (Routes, error) {
	var raw map[string][]ribPath
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("reading gobgp's table: %w: %.200s", err, out)
	}
	rs := Routes{}
	for prefix, paths := range raw {
		for _, rp := range paths {
			if rp.Withdraw {
				continue
			}
			var p Path
			p.Neighbor = rp.Neighbor
			for _, a := range rp.Attrs {
				switch a.Type {
				case 2: // AS_PATH
					for _, seg := range a.ASPaths {
						p.ASPath = append(p.ASPath, seg.ASNs...)
					}
				case 3, 14: // NEXT_HOP; MP_REACH_NLRI, which carries IPv6's
					p.NextHop = a.NextHop
				}
			}
			rs[prefix] = append(rs[prefix], p)
		}
	}
	return rs, nil
}

// Established lists the neighbours whose session is up.
func (r *Router) Established(ctx context.Context) ([]string, error) {
	out, err := r.gobgp(ctx, "neighbor", "-j")
	if err != nil {
		return nil, err
	}
	var ns []struct {
		State struct {
			Neighbor string `json:"neighbor_address"`
			State    int    `json:"session_state"`
		} `json:"state"`
	}
	if err := json.Unmarshal(out, &ns); err != nil {
		return nil, fmt.Errorf("reading gobgp's neighbours: %w", err)
	}
	var up []string
	for _, n := range ns {
		if n.State.State == 6 { // ESTABLISHED in GoBGP's API enum
			up = append(up, n.State.Neighbor)
		}
	}
	sort.Strings(up)
	return up, nil
}

// APIPortBase is the first gobgpd API port. It is below the kernel's
// ephemeral range (32768-60999 by default), where any outgoing connection
// in the namespace could already hold a port.
const APIPortBase = 21051

// The routers, as the emulator's BGP neighbour data names them: IPv4 and,
// in the same order, IPv6 peer addresses.
var (
	RouterAddrs  = []string{"169.254.255.1", "169.254.255.2"}
	RouterAddrs6 = []string{"fc00::e", "fc00::f"}
)

const (
	RouterASN  = 65530 // the emulator's peer_as
	ProjectASN = 65000 // the project's (customer) ASN
)

// MetroBlocks are private blocks for the emulator's metros: TEST-NET
// addresses, which GoBGP accepts as next hops (it drops a 127/8 next hop
// from a peer that is not itself on 127/8).
var MetroBlocks = map[string]string{"da": "198.51.100.0/24", "sv": "203.0.113.0/24"}

// StartRouters starts the two Equinix routers at RouterAddrs (ASN
// RouterASN, multipath), each accepting sessions from the nodes' addresses
// with ProjectASN and the password ("" for none), and routes as metros
// allow (RouterOptions.Metros; nil accepts every route). The routers run
// behind the nodes' gateway (gateway.go), which holds RouterAddrs; add the
// nodes' addresses to this namespace's loopback first, not RouterAddrs.
func StartRouters(bins Binaries, dir, password string, nodeIPs []string, metros []MetroRoutes) ([]*Router, error) {
	return StartDualStackRouters(bins, dir, password, nodeIPs, nil, metros)
}

// StartDualStackRouters is StartRouters with IPv6 sessions too: router i
// also listens on RouterAddrs6[i] for sessions from nodeIPv6s (the nodes'
// public IPv6 addresses), as Equinix's do. Add the nodes' IPv6 addresses to
// the loopback too. No nodeIPv6s is StartRouters.
func StartDualStackRouters(bins Binaries, dir, password string, nodeIPs, nodeIPv6s []string, metros []MetroRoutes) ([]*Router, error) {
	nodes := slices.Sorted(slices.Values(nodeIPs))
	var out []*Router
	for i, addr := range RouterAddrs {
		o := RouterOptions{
			Name: fmt.Sprintf("router-%d", i+1), Addr: addr, ASN: RouterASN, APIPort: APIPortBase + i,
			Password: password, Neighbors: nodes, PeerASN: ProjectASN, Metros: metros,
		}
		if len(nodeIPv6s) > 0 {
			o.Addr6, o.Neighbors6 = RouterAddrs6[i], slices.Sorted(slices.Values(nodeIPv6s))
		}
		r, err := StartRouter(bins, dir, o)
		if err != nil {
			for _, r := range out {
				r.Stop()
			}
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Prefixes reads every router once: prefix -> router address -> paths.
func Prefixes(ctx context.Context, routers []*Router) (map[string]map[string][]Path, error) {
	out := map[string]map[string][]Path{}
	for _, r := range routers {
		rs, err := r.Routes(ctx)
		if err != nil {
			return nil, err
		}
		for p, paths := range rs {
			if out[p] == nil {
				out[p] = map[string][]Path{}
			}
			out[p][r.Addr] = paths
		}
	}
	return out, nil
}
