package dataplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The routers stand where Equinix documents its own: the BGP peer addresses
// (169.254.255.1 and .2, fc00::e and ::f) are not on the nodes' network but
// behind their private gateway. Each of the three parts has a network
// namespace of its own, inside the private user namespace:
//
//	nodes (this process's netns: the nodes' addresses on its loopback)
//	  gw-nodes 10.254.0.1/30, fd00:254::1/64
//	gateway (forwards; its default route goes back to the nodes)
//	  gw-routers 10.254.0.5/30, fd00:254:1::1/64
//	routers (the peer addresses on its loopback, where gobgpd listens)
//
// So every peer is two hops from every node: the gateway decrements a
// packet's TTL, and a speaker that keeps eBGP at TTL 1 (an FRR or GoBGP
// neighbour without multihop) never gets its SYN to a router. That is why
// Equinix's API reports every neighbour with multihop: true. The
// addresses of the links are the test's own (a /30 of 10.254/16 and
// ULAs); Equinix does not document its gateway's.
var (
	fabricOnce sync.Once
	fabric     *Gateway
	errFabric  error
)

// Gateway is the gateway and routers' namespaces, held open by a process
// each; they die with the test process.
type Gateway struct {
	gateway, routers *Proc
}

// gatewayLinks are the commands that build the layout above, given the
// gateway's and the routers' netns (as /proc paths) and their holders'
// PIDs: ip commands run in the nodes' netns unless they start with a
// netns path. Pure, so the layout is readable (and tested) in one place.
func gatewayLinks(gwNS, rtNS string, gwPID, rtPID int) [][]string {
	in := func(ns string, args ...string) []string { return append([]string{ns}, args...) }
	var c [][]string
	// nodes <-> gateway
	c = append(c,
		[]string{"link", "add", "gw-nodes", "type", "veth", "peer", "name", "nodes", "netns", fmt.Sprint(gwPID)},
		[]string{"addr", "add", "10.254.0.1/30", "dev", "gw-nodes"},
		[]string{"-6", "addr", "add", "fd00:254::1/64", "dev", "gw-nodes", "nodad"},
		[]string{"link", "set", "gw-nodes", "up"},
		in(gwNS, "link", "set", "lo", "up"),
		in(gwNS, "addr", "add", "10.254.0.2/30", "dev", "nodes"),
		in(gwNS, "-6", "addr", "add", "fd00:254::2/64", "dev", "nodes", "nodad"),
		in(gwNS, "link", "set", "nodes", "up"),
		// gateway <-> routers
		in(gwNS, "link", "add", "gw-routers", "type", "veth", "peer", "name", "gateway", "netns", fmt.Sprint(rtPID)),
		in(gwNS, "addr", "add", "10.254.0.5/30", "dev", "gw-routers"),
		in(gwNS, "-6", "addr", "add", "fd00:254:1::1/64", "dev", "gw-routers", "nodad"),
		in(gwNS, "link", "set", "gw-routers", "up"),
		in(rtNS, "link", "set", "lo", "up"),
		in(rtNS, "addr", "add", "10.254.0.6/30", "dev", "gateway"),
		in(rtNS, "-6", "addr", "add", "fd00:254:1::2/64", "dev", "gateway", "nodad"),
		in(rtNS, "link", "set", "gateway", "up"),
	)
	// The peer addresses, on the routers' loopback.
	for _, a := range RouterAddrs {
		c = append(c, in(rtNS, "addr", "add", a+"/32", "dev", "lo"))
	}
	for _, a := range RouterAddrs6 {
		c = append(c, in(rtNS, "-6", "addr", "add", a+"/128", "dev", "lo", "nodad"))
	}
	// Routes: the nodes reach the peers through the gateway; the gateway
	// reaches the peers through the routers' link and everything else
	// (the nodes' addresses) back through the nodes' link; the routers
	// answer through the gateway.
	for _, a := range RouterAddrs {
		c = append(c,
			[]string{"route", "add", a + "/32", "via", "10.254.0.2"},
			in(gwNS, "route", "add", a+"/32", "via", "10.254.0.6"))
	}
	for _, a := range RouterAddrs6 {
		c = append(c,
			[]string{"-6", "route", "add", a + "/128", "via", "fd00:254::2"},
			in(gwNS, "-6", "route", "add", a+"/128", "via", "fd00:254:1::2"))
	}
	c = append(c,
		in(gwNS, "route", "add", "default", "via", "10.254.0.1"),
		in(gwNS, "-6", "route", "add", "default", "via", "fd00:254::1"),
		in(rtNS, "route", "add", "default", "via", "10.254.0.5"),
		in(rtNS, "-6", "route", "add", "default", "via", "fd00:254:1::1"),
	)
	return c
}

// startGateway builds the layout once per process (the routers of later
// worlds reuse it) and returns it.
func startGateway(dir string) (*Gateway, error) {
	fabricOnce.Do(func() { fabric, errFabric = buildGateway(dir) })
	return fabric, errFabric
}

func buildGateway(dir string) (*Gateway, error) {
	if !InNamespace() {
		return nil, errors.New("refusing to build the routers' gateway outside the private network namespace")
	}
	hold := func(name string) (*Proc, error) {
		// unshare execs sleep in the new netns: the holder's PID is the
		// namespace's handle.
		return Start(dir, name, "unshare", []string{"--net", "--", "sleep", "infinity"}, nil)
	}
	gw, err := hold("gateway-netns")
	if err != nil {
		return nil, err
	}
	rt, err := hold("routers-netns")
	if err != nil {
		gw.Stop()
		return nil, err
	}
	g := &Gateway{gateway: gw, routers: rt}
	fail := func(err error) (*Gateway, error) {
		gw.Stop()
		rt.Stop()
		return nil, fmt.Errorf("building the routers' gateway: %w", err)
	}
	if err := g.waitNamespaces(); err != nil {
		return fail(err)
	}
	for _, args := range gatewayLinks(g.GatewayNetns(), g.RoutersNetns(), gw.Pid(), rt.Pid()) {
		if err := runIP(args); err != nil {
			return fail(err)
		}
	}
	// The gateway forwards, as a router does; the others do not need to.
	bin, args := inNetns(g.GatewayNetns(), "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("turning on forwarding in the gateway: %s", firstLine(string(out), err)))
	}
	return g, nil
}

// waitNamespaces waits until both holders run in a netns other than this
// process's (unshare has made it and exec'd sleep).
func (g *Gateway) waitNamespaces() error {
	self, err := netnsID("/proc/self/ns/net")
	if err != nil {
		return err
	}
	for range 100 {
		a, errA := netnsID(g.GatewayNetns())
		b, errB := netnsID(g.RoutersNetns())
		if errA == nil && errB == nil && a != self && b != self {
			return nil
		}
		if done, err := g.gateway.Exited(); done {
			return fmt.Errorf("the gateway's namespace holder exited: %v; see %s", err, g.gateway.Log)
		}
		if done, err := g.routers.Exited(); done {
			return fmt.Errorf("the routers' namespace holder exited: %v; see %s", err, g.routers.Log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the gateway's and routers' namespaces did not appear within 5s")
}

// GatewayNetns and RoutersNetns are the namespaces' /proc paths, for
// nsenter --net=.
func (g *Gateway) GatewayNetns() string { return fmt.Sprintf("/proc/%d/ns/net", g.gateway.Pid()) }
func (g *Gateway) RoutersNetns() string { return fmt.Sprintf("/proc/%d/ns/net", g.routers.Pid()) }

// runIP runs ip with args, in the netns args[0] names when it is a /proc
// path, else in this process's.
func runIP(args []string) error {
	var netns string
	if strings.HasPrefix(args[0], "/proc/") {
		netns, args = args[0], args[1:]
	}
	bin, argv := inNetns(netns, "ip", args...)
	out, err := exec.Command(bin, argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %s", bin, strings.Join(argv, " "), firstLine(string(out), err))
	}
	return nil
}

// netnsID is the namespace a /proc/…/ns/net link names ("net:[…]").
func netnsID(path string) (string, error) { return os.Readlink(path) }

// inNetns is the command that runs bin with args in the netns at the /proc
// path netns (nsenter, which execs bin: its PID is bin's), or as it is for
// "" (this process's netns).
func inNetns(netns, bin string, args ...string) (string, []string) {
	if netns == "" {
		return bin, args
	}
	return "nsenter", append([]string{"--net=" + netns, "--", bin}, args...)
}
