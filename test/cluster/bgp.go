//go:build linux

package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The Equinix side of a cloud cluster (Options.Cloud): two routers at the
// peer addresses Equinix Metal's BGP neighbour data names, each a netns on
// the nodes' bridge running BIRD 2, which installs what the nodes announce
// into its kernel table with ECMP ("merge paths"); and a client netns
// behind both routers, whose default route spreads flows over them.
//
// The routers and the client hash multipath on the 5-tuple (addresses,
// protocol, ports: fib_multipath_hash_policy 1), not on Linux's default
// of addresses only. Equinix's documentation does not say how its routers
// hash; a data-centre switch's default is the 5-tuple (Juniper's EX and
// QFX5100, for one, hash IPv4 ECMP on addresses, protocol and both ports
// unless told otherwise), and it is the stricter world: each connection
// from one client may reach another node. So ClientIP session affinity,
// which kube-proxy keeps per node, does not hold through an Elastic IP
// announced from several nodes; the conformance specs that expect it fail
// here in every run, as they would there (TESTING.md says which).
//
//	client netns   lo 10.203.0.1-16/32 (ClientIPs); up1 10.203.1.1/30 -> router 1,
//	               up2 10.203.2.1/30 -> router 2; default via both
//	router i       fabric 10.201.0.(1+i)/24 on br0, lo 169.254.255.i/32,
//	               client 10.203.i.2/30; default via 10.201.0.1 (the
//	               gateway netns: the host, the pods)
//	gateway        169.254.255.i/32 via 10.201.0.(1+i); no ICMP redirects
//	nodes          169.254.255.i/32 via 10.201.0.1, the gateway
//
// The BGP peers are where Equinix Metal puts them: loopbacks of routers
// behind the node's private gateway, which its neighbour data reports as
// multihop. A node's session crosses the gateway, whose forwarding takes
// one from the TTL, so a speaker that keeps eBGP at TTL 1 (FRR and GoBGP
// unless told multihop) never gets a session up, and FRR's connected
// check fails as well: the peer is on no network the node is on. The
// gateway sends no redirect, which would let a node reach the router
// straight across the bridge. Each router accepts sessions only from the
// nodes' addresses (their private IPv4, public IPv6); routes keep the
// node as next hop (the node is on the router's fabric), so the data
// plane goes straight from router to node, one path per announcing node.
//
// A dual-stack cluster adds IPv6 beside each of these: the routers also
// peer at Equinix's IPv6 peer addresses fc00::e and fc00::f (on their lo,
// fabric 2001:db8:100::(1+i)/64, reached through the gateway's
// 2001:db8:100::1) with each node's public IPv6; the client
// has fd00:203::1-16/128 (ClientIPs6), links fd00:203:i::1/126 and a
// multipath IPv6 default route.
const (
	// ClientIP is the client's first address, outside every node and pod
	// range; the default source of what the client netns sends.
	ClientIP  = "10.203.0.1"
	clientNet = "10.203.0.0/16"
	// clientAddrs is how many addresses the client has (ClientIPs): many
	// clients, as a Service has, and a router that hashed on addresses
	// alone would still spread them.
	clientAddrs = 16
	// PeerASN is the routers' ASN (the emulator's peer_as); the nodes
	// speak the project's, projectASN.
	PeerASN    = 65530
	projectASN = 65000
)

// ClientIP6 is the client's first IPv6 address (a dual-stack cluster's).
const (
	ClientIP6  = "fd00:203::1"
	clientNet6 = "fd00:203::/48"
)

// PeerIPs are the routers' BGP addresses (the emulator's peer_ips), and
// PeerIPs6 their IPv6 ones (those of its IPv6 neighbour data).
var (
	PeerIPs  = []string{"169.254.255.1", "169.254.255.2"}
	PeerIPs6 = []string{"fc00::e", "fc00::f"}
)

// Router is one BGP router of a cloud cluster.
type Router struct {
	Name   string // its netns
	PeerIP string
	Fabric string // its address on the nodes' bridge
	// PeerIP6 and Fabric6 are a dual-stack cluster's.
	PeerIP6, Fabric6 string
	dir              string
	bird             *process
}

func (c *Cluster) setupBGPNet() error {
	cl := c.id + "-c"
	c.ClientNS = cl
	steps := [][]string{
		{"ip", "netns", "add", cl},
		{"ip", "-n", cl, "link", "set", "lo", "up"},
		// Return traffic from the nodes and the host to the client goes
		// through router 1.
		{"ip", "-n", c.router, "route", "add", clientNet, "via", "10.201.0.2"},
		{"ip", "route", "add", clientNet, "via", routerUpIP},
	}
	if c.DualStack {
		steps = append(steps,
			[]string{"ip", "-n", c.router, "-6", "route", "add", clientNet6, "via", fmt.Sprintf("2001:db8:100::%x", 2)})
	}
	for i, peer := range PeerIPs {
		n := i + 1
		r := &Router{Name: fmt.Sprintf("%s-b%d", c.id, n), PeerIP: peer, Fabric: fmt.Sprintf("10.201.0.%d", 1+n),
			dir: filepath.Join(c.Dir, fmt.Sprintf("router-%d", n))}
		if c.DualStack {
			r.PeerIP6, r.Fabric6 = PeerIPs6[i], fmt.Sprintf("2001:db8:100::%x", 1+n)
		}
		c.Routers = append(c.Routers, r)
		fv, cv := fmt.Sprintf("%sb%d", c.id, n), fmt.Sprintf("%sc%d", c.id, n)
		up := fmt.Sprintf("up%d", n)
		steps = append(steps,
			[]string{"ip", "netns", "add", r.Name},
			[]string{"ip", "-n", r.Name, "link", "set", "lo", "up"},
			[]string{"ip", "-n", r.Name, "addr", "add", peer + "/32", "dev", "lo"},
			[]string{"ip", "link", "add", fv, "type", "veth", "peer", "name", fv + "p"},
			[]string{"ip", "link", "set", fv, "netns", c.router},
			[]string{"ip", "-n", c.router, "link", "set", fv, "master", "br0"},
			[]string{"ip", "-n", c.router, "link", "set", fv, "up"},
			[]string{"ip", "link", "set", fv + "p", "netns", r.Name},
			[]string{"ip", "-n", r.Name, "link", "set", fv + "p", "name", "fabric"},
			[]string{"ip", "-n", r.Name, "addr", "add", r.Fabric + "/24", "dev", "fabric"},
			[]string{"ip", "-n", r.Name, "link", "set", "fabric", "up"},
			[]string{"ip", "-n", r.Name, "route", "add", "default", "via", routerBrIP},
			[]string{"ip", "-n", c.router, "route", "add", peer + "/32", "via", r.Fabric},
			[]string{"ip", "link", "add", cv, "type", "veth", "peer", "name", cv + "p"},
			[]string{"ip", "link", "set", cv, "netns", r.Name},
			[]string{"ip", "-n", r.Name, "link", "set", cv, "name", "client"},
			[]string{"ip", "-n", r.Name, "addr", "add", fmt.Sprintf("10.203.%d.2/30", n), "dev", "client"},
			[]string{"ip", "-n", r.Name, "link", "set", "client", "up"},
			[]string{"ip", "-n", r.Name, "route", "add", "10.203.0.0/24", "via", fmt.Sprintf("10.203.%d.1", n)},
			[]string{"ip", "link", "set", cv + "p", "netns", cl},
			[]string{"ip", "-n", cl, "link", "set", cv + "p", "name", up},
			[]string{"ip", "-n", cl, "addr", "add", fmt.Sprintf("10.203.%d.1/30", n), "dev", up},
			[]string{"ip", "-n", cl, "link", "set", up, "up"},
		)
		if c.DualStack {
			steps = append(steps,
				[]string{"ip", "-n", r.Name, "addr", "add", r.PeerIP6 + "/128", "dev", "lo"},
				[]string{"ip", "-n", r.Name, "addr", "add", r.Fabric6 + "/64", "dev", "fabric", "nodad"},
				[]string{"ip", "-n", r.Name, "-6", "route", "add", "default", "via", routerBrIP6},
				[]string{"ip", "-n", c.router, "-6", "route", "add", r.PeerIP6 + "/128", "via", r.Fabric6},
				[]string{"ip", "-n", r.Name, "addr", "add", fmt.Sprintf("fd00:203:%d::2/126", n), "dev", "client", "nodad"},
				[]string{"ip", "-n", r.Name, "-6", "route", "add", "fd00:203::/64", "via", fmt.Sprintf("fd00:203:%d::1", n)},
				[]string{"ip", "-n", cl, "addr", "add", fmt.Sprintf("fd00:203:%d::1/126", n), "dev", up, "nodad"},
			)
		}
	}
	for _, a := range ClientIPs() {
		steps = append(steps, []string{"ip", "-n", cl, "addr", "add", a + "/32", "dev", "lo"})
	}
	steps = append(steps, []string{"ip", "-n", cl, "route", "add", "default", "src", ClientIP,
		"nexthop", "via", "10.203.1.2", "dev", "up1", "nexthop", "via", "10.203.2.2", "dev", "up2"})
	if c.DualStack {
		for _, a := range ClientIPs6() {
			steps = append(steps, []string{"ip", "-n", cl, "addr", "add", a + "/128", "dev", "lo", "nodad"})
		}
		steps = append(steps, []string{"ip", "-n", cl, "-6", "route", "add", "default", "src", ClientIP6,
			"nexthop", "via", "fd00:203:1::2", "dev", "up1", "nexthop", "via", "fd00:203:2::2", "dev", "up2"})
	}
	if err := runAll(steps); err != nil {
		return err
	}
	for _, r := range c.Routers {
		if err := c.forwarding(r.Name); err != nil {
			return err
		}
	}
	for _, ns := range append(routerNames(c.Routers), cl) {
		if err := c.hashOnPorts(ns); err != nil {
			return err
		}
	}
	// A redirect would tell a node to reach a router across the bridge
	// in one hop. Linux sends one when either of these is on. (IPv6
	// redirects are ignored by the nodes, which forward.)
	for _, key := range []string{"net/ipv4/conf/all/send_redirects", "net/ipv4/conf/br0/send_redirects"} {
		if err := sysctlNS(c.router, key, "0"); err != nil {
			return err
		}
	}
	return nil
}

// hashOnPorts makes a netns hash its multipath routes on the 5-tuple (see
// the top of this file for why).
func (c *Cluster) hashOnPorts(ns string) error {
	if err := sysctlNS(ns, "net/ipv4/fib_multipath_hash_policy", "1"); err != nil || !c.DualStack {
		return err
	}
	return sysctlNS(ns, "net/ipv6/fib_multipath_hash_policy", "1")
}

func routerNames(rs []*Router) []string {
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return names
}

// ClientIPs are the client netns' addresses, ClientIP first.
func ClientIPs() []string {
	var ips []string
	for i := 1; i <= clientAddrs; i++ {
		ips = append(ips, fmt.Sprintf("10.203.0.%d", i))
	}
	return ips
}

// ClientIPs6 are the client netns' IPv6 addresses (a dual-stack
// cluster's), ClientIP6 first.
func ClientIPs6() []string {
	var ips []string
	for i := 1; i <= clientAddrs; i++ {
		ips = append(ips, fmt.Sprintf("fd00:203::%x", i))
	}
	return ips
}

// nodeBGPRoutes gives a node its routes to the peers (op add or replace):
// through the gateway, as Equinix Metal's nodes have them.
func (c *Cluster) nodeBGPRoutes(n *Node, op string) error {
	for _, r := range c.Routers {
		if err := run("ip", "-n", n.NetNS, "route", op, r.PeerIP+"/32", "via", routerBrIP); err != nil {
			return err
		}
		if c.DualStack {
			if err := run("ip", "-n", n.NetNS, "-6", "route", op, r.PeerIP6+"/128", "via", routerBrIP6); err != nil {
				return err
			}
		}
	}
	return nil
}

// birdConfig is a router's id and log, followed by birdFamily for IPv4
// and, in a dual-stack cluster, for IPv6 (birdConf).
const birdConfig = `router id {{id}};
log "{{dir}}/bird.log" all;
protocol device { scan time 2; }
`

// birdFamily: one passive eBGP session per node in one address family
// (MetalLB's speaker dials), everything learned goes to the kernel with the
// node as next hop, equal paths merged. The session is a direct one on the
// router's side: the node is on its fabric, and its answers go straight
// back at TTL 1 (BIRD refuses "gateway direct" with multihop). The node's
// side crosses the gateway. The sessions are protocols node<N> over IPv4
// and v6node<N> over IPv6 (what Established counts); each change of their
// state is logged (what Resets counts). The hold time offered is 90 s:
// Equinix documents none, 90 s is the default of the Juniper routers whose
// documentation says how they hash, and BGP takes the smaller of the two
// sides' offers, so the speaker's own setting decides how long a dead node
// keeps its routes, as it would at Equinix (a shorter offer here would hide
// the default's cost). {{session}} is birdBFD's session lines in a
// cluster whose speakers run BFD, and nothing otherwise.
const birdFamily = `protocol kernel kernel{{v}} {
  ipv{{v}} { import none; export where source = RTS_BGP; };
  merge paths on;
  scan time 2;
}
template bgp {{prefix}}node {
  local {{peer}} as {{asn}};
  passive on;
{{session}}  hold time 90;
  debug { states };
  ipv{{v}} { import all; export none; };
}
{{neighbors}}`

// birdBFD is what a router adds in a cluster whose speakers run BFD
// (CloudOptions with bgpBFDInterval): BFD itself, and each session
// multihop on the router's side too, as Equinix reports its neighbours,
// since BIRD ties a session's BFD to its BGP form and a speaker behind the
// gateway runs multihop BFD (RFC 5883, port 4784). The node's next hop is
// then resolved through the fabric's connected route (protocol direct), so
// the data plane still goes straight from router to node. A router told by
// BFD that a node is gone closes its session at once, without the graceful
// restart a hold timer running out would allow. The timing is the
// speaker's: BIRD asks for packets every 10 ms at most and takes the
// speaker's slower rate and multiplier. Only there: the routers' form for
// the other speakers is the one their tests were measured with. (With
// every session multihop, kube-vip's session from one node once failed to
// come up in 2 of 3 runs, as often as with the direct form: the kube-vip
// module wrote the multihop annotation in its sync, after the core's peer
// annotations, and kube-vip reads them once. The core now writes it in
// the same patch.)
const (
	birdBFD        = "protocol direct { ipv4; ipv6; }\nprotocol bfd { }\n"
	birdBFDSession = "  multihop;\n  bfd on;\n"
)

// birdConf is router r's configuration.
func (c *Cluster) birdConf(r *Router) string {
	type family struct {
		v, prefix, peer string
		addr            func(*Node) string
	}
	fams := []family{{"4", "", r.PeerIP, func(n *Node) string { return n.IP }}}
	if c.DualStack {
		fams = append(fams, family{"6", "v6", r.PeerIP6, func(n *Node) string { return n.IPv6 }})
	}
	conf := fill(birdConfig, "id", r.PeerIP, "dir", r.dir)
	session := ""
	if c.cloud != nil && c.cloud.configValue("bgpBFDInterval") != "" {
		conf += birdBFD
		session = birdBFDSession
	}
	for _, f := range fams {
		var nb strings.Builder
		for i, n := range c.Nodes {
			fmt.Fprintf(&nb, "protocol bgp %snode%d from %snode { neighbor %s as %d; }\n", f.prefix, i+1, f.prefix, f.addr(n), projectASN)
		}
		conf += fill(birdFamily, "v", f.v, "prefix", f.prefix, "peer", f.peer, "asn", fmt.Sprint(PeerASN), "neighbors", nb.String(), "session", session) + "\n"
	}
	return conf
}

func (c *Cluster) startRouters() error {
	cg := c.cgroupTop + "/routers"
	if err := makeCgroup(cg); err != nil {
		return err
	}
	for _, r := range c.Routers {
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		conf := filepath.Join(r.dir, "bird.conf")
		if err := os.WriteFile(conf, []byte(c.birdConf(r)), 0o644); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		var err error
		r.bird, err = startInNS("bird "+r.Name, r.Name, cg, "bird", filepath.Join(r.dir, "bird.out"),
			[]string{"-f", "-c", conf, "-s", filepath.Join(r.dir, "bird.ctl"), "-P", filepath.Join(r.dir, "bird.pid")})
		if err != nil {
			return err
		}
		// Every change of the router's kernel table, timestamped: what a
		// client's failed request met (RouteChanges).
		if _, err := startInNS("routes "+r.Name, r.Name, cg, "ip", filepath.Join(r.dir, routesLog),
			[]string{"-ts", "monitor", "route"}); err != nil {
			return err
		}
	}
	return nil
}

// routesLog is each router's `ip -ts monitor route` output.
const routesLog = "routes.log"

// RouteChanges are the router's kernel route changes (as `ip -ts monitor
// route` printed them) for addr, between from and to.
func (r *Router) RouteChanges(addr string, from, to time.Time) []string {
	b, err := os.ReadFile(filepath.Join(r.dir, routesLog))
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	keep := false // a multipath route's nexthops follow on lines of their own
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, " ") {
			if keep {
				out[len(out)-1] += " " + strings.TrimSpace(line)
			}
			continue
		}
		// [2026-11-29T03:28:25.123456] Deleted 198.18.0.59 proto bird ...
		stamp, rest, ok := strings.Cut(strings.TrimPrefix(line, "["), "] ")
		keep = false
		if !ok || !strings.Contains(" "+rest+" ", " "+addr+" ") {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02T15:04:05.000000", stamp, time.Local)
		if err != nil || at.Before(from) || at.After(to) {
			continue
		}
		out = append(out, line)
		keep = true
	}
	return out
}

// Birdc runs a BIRD command on the router ("show protocols").
func (r *Router) Birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", filepath.Join(r.dir, "bird.ctl")}, args...)...).CombinedOutput()
	return string(out), err
}

// Nexthops are the addresses the router's kernel forwards ip (IPv4 or
// IPv6) to (the nodes announcing it), none when it has no route of its
// own for it.
func (r *Router) Nexthops(ip string) ([]string, error) {
	fam, host := "-4", ip+"/32"
	if strings.Contains(ip, ":") {
		fam, host = "-6", ip+"/128"
	}
	out, err := exec.Command("ip", "-n", r.Name, fam, "route", "show", "exact", host).Output()
	if err != nil {
		return nil, fmt.Errorf("cluster: ip -n %s route show %s: %w", r.Name, ip, err)
	}
	var hops []string
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "via" {
			hops = append(hops, f[i+1])
		}
	}
	return hops, nil
}

// SessionUps counts, per BGP session of the router (the protocols node<N>
// and v6node<N>), how often it came up since the router started, from the
// state changes BIRD logs: a session reset shows as one more.
func (r *Router) SessionUps() (map[string]int, error) {
	b, err := os.ReadFile(filepath.Join(r.dir, "bird.log"))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ups := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		before, ok := strings.CutSuffix(line, ": State changed to up")
		if !ok {
			continue
		}
		if f := strings.Fields(before); len(f) > 0 {
			ups[f[len(f)-1]]++
		}
	}
	return ups, nil
}

// BFDUp lists the addresses of the nodes whose BFD session with the router
// is up, sorted.
func (r *Router) BFDUp() ([]string, error) {
	out, err := r.Birdc("show", "bfd", "sessions")
	if err != nil {
		return nil, fmt.Errorf("cluster: birdc on %s: %v: %s", r.Name, err, out)
	}
	var up []string
	for _, line := range strings.Split(out, "\n") {
		// IP address, interface, state, since, interval, timeout.
		if f := strings.Fields(line); len(f) >= 3 && f[2] == "Up" {
			up = append(up, f[0])
		}
	}
	sort.Strings(up)
	return up, nil
}

// Established counts the router's BGP sessions that are up, over IPv4
// (with the nodes' addresses) and over IPv6.
func (r *Router) Established() (v4, v6 int, err error) {
	out, err := r.Birdc("show", "protocols")
	if err != nil {
		return 0, 0, fmt.Errorf("cluster: birdc on %s: %v: %s", r.Name, err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "Established") {
			continue
		}
		switch {
		case strings.HasPrefix(line, "node"):
			v4++
		case strings.HasPrefix(line, "v6node"):
			v6++
		}
	}
	return v4, v6, nil
}
