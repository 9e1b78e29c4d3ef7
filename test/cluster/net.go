//go:build linux

package cluster

import (
	"fmt"
	"path/filepath"
)

// setupRouter makes the router netns: the bridge the nodes hang off, and a
// veth to the host. Forwarding is turned on there, not on the host.
func (c *Cluster) setupRouter() error {
	r := c.router
	steps := [][]string{
		{"ip", "netns", "add", r},
		{"ip", "-n", r, "link", "set", "lo", "up"},
		{"ip", "link", "add", c.hostVeth, "type", "veth", "peer", "name", c.id + "u"},
		{"ip", "link", "set", c.id + "u", "netns", r},
		{"ip", "-n", r, "link", "set", c.id + "u", "name", "uplink"},
		{"ip", "-n", r, "addr", "add", routerUpIP + "/30", "dev", "uplink"},
		{"ip", "-n", r, "link", "set", "uplink", "up"},
		{"ip", "-n", r, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", r, "addr", "add", routerBrIP + "/24", "dev", "br0"},
		{"ip", "-n", r, "link", "set", "br0", "up"},
		{"ip", "addr", "add", hostIP + "/30", "dev", c.hostVeth},
		{"ip", "link", "set", c.hostVeth, "up"},
		{"ip", "route", "add", nodeNet, "via", routerUpIP},
		{"ip", "route", "add", podNet, "via", routerUpIP},
	}
	if c.DualStack {
		steps = append(steps, []string{"ip", "-n", r, "addr", "add", routerBrIP6 + "/64", "dev", "br0", "nodad"})
	}
	if err := runAll(steps); err != nil {
		return err
	}
	return c.forwarding(r)
}

// forwarding turns on forwarding in a netns, for IPv6 too in a dual-stack
// cluster.
func (c *Cluster) forwarding(ns string) error {
	if err := sysctlNS(ns, "net/ipv4/ip_forward", "1"); err != nil || !c.DualStack {
		return err
	}
	return sysctlNS(ns, "net/ipv6/conf/all/forwarding", "1")
}

func runAll(steps [][]string) error {
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// setupNodeNet makes node i's netns: eth0 on the router's bridge, a default
// route through the router, and the router's route to the node's pods.
func (c *Cluster) setupNodeNet(n *Node, i int) error {
	rv, nv := fmt.Sprintf("%sn%d", c.id, i), fmt.Sprintf("%sn%dp", c.id, i)
	steps := [][]string{
		{"ip", "netns", "add", n.NetNS},
		{"ip", "-n", n.NetNS, "link", "set", "lo", "up"},
		{"ip", "link", "add", rv, "type", "veth", "peer", "name", nv},
		{"ip", "link", "set", rv, "netns", c.router},
		{"ip", "-n", c.router, "link", "set", rv, "master", "br0"},
		{"ip", "-n", c.router, "link", "set", rv, "up"},
		{"ip", "link", "set", nv, "netns", n.NetNS},
		{"ip", "-n", n.NetNS, "link", "set", nv, "name", "eth0"},
		{"ip", "-n", n.NetNS, "addr", "add", n.IP + "/24", "dev", "eth0"},
		{"ip", "-n", n.NetNS, "link", "set", "eth0", "up"},
		{"ip", "-n", n.NetNS, "route", "add", "default", "via", routerBrIP},
		{"ip", "-n", c.router, "route", "add", n.PodCIDR, "via", n.IP},
	}
	if c.DualStack {
		// nodad: no duplicate address detection to wait for on a link
		// the test made.
		steps = append(steps,
			[]string{"ip", "-n", n.NetNS, "addr", "add", n.IPv6 + "/64", "dev", "eth0", "nodad"},
			[]string{"ip", "-n", n.NetNS, "-6", "route", "add", "default", "via", routerBrIP6},
			[]string{"ip", "-n", c.router, "-6", "route", "add", n.PodCIDR6, "via", n.IPv6},
		)
	}
	if err := runAll(steps); err != nil {
		return err
	}
	if c.DualStack {
		// Linux drops a link's IPv6 addresses when it goes down
		// (SetNodeLink) unless told to keep them, as IPv4's are kept.
		if err := sysctlNS(n.NetNS, "net/ipv6/conf/eth0/keep_addr_on_down", "1"); err != nil {
			return err
		}
	}
	// The CNI ptp plugin turns it on too; set it before any pod exists.
	return c.forwarding(n.NetNS)
}

// sysctlNS writes a net sysctl of a netns: /proc/sys/net belongs to the
// netns of the process that opens it, so the write runs under nsenter.
func sysctlNS(ns, key, value string) error {
	return inNS(ns, "sh", "-c", "echo "+value+" > "+filepath.Join("/proc/sys", key))
}

// SetNodeLink takes a node off the network (its eth0 down) or puts it
// back. The kernel drops a link's routes when it goes down and gives back
// only the connected one when it comes up: the default route and the
// routes to the BGP peers are restored here, as a node's network
// configuration would.
func (c *Cluster) SetNodeLink(n *Node, up bool) error {
	if !up {
		return run("ip", "-n", n.NetNS, "link", "set", "eth0", "down")
	}
	if err := run("ip", "-n", n.NetNS, "link", "set", "eth0", "up"); err != nil {
		return err
	}
	if err := run("ip", "-n", n.NetNS, "route", "replace", "default", "via", routerBrIP); err != nil {
		return err
	}
	if c.DualStack {
		if err := run("ip", "-n", n.NetNS, "-6", "route", "replace", "default", "via", routerBrIP6); err != nil {
			return err
		}
	}
	return c.nodeBGPRoutes(n, "replace")
}
