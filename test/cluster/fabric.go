//go:build linux

package cluster

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// ControlPlaneEIPTag tags the cloud cluster's control-plane Elastic IP
// (the chart's config.eipTag): the emulator holds one such reservation,
// unassigned, as a user creates it before installing the CCM.
const ControlPlaneEIPTag = "cluster-test-control-plane"

// What Equinix's network does with an Elastic IP assigned to a device
// (the control-plane EIP; Services' EIPs are announced with BGP instead):
// it routes the address to that device. syncFabric does the same on the
// routers: a static route per assigned Elastic IP to its device's node,
// kept in step with the emulator's assignments. BIRD leaves these routes
// alone (its kernel protocol learns and removes only its own).
func (c *Cluster) syncFabric(stop <-chan struct{}) {
	have := map[string]string{} // prefix -> node IP
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	for {
		want := c.assignedEIPs()
		for p, via := range want {
			if have[p] == via {
				continue
			}
			if err := c.routeOnRouters("replace", p, via); err != nil {
				c.logf("cluster: fabric: %v", err)
				continue
			}
			c.logf("cluster: fabric: %s routed to %s", p, via)
			have[p] = via
		}
		for p := range have {
			if _, ok := want[p]; !ok {
				if err := c.routeOnRouters("del", p, ""); err != nil {
					c.logf("cluster: fabric: %v", err)
					continue
				}
				c.logf("cluster: fabric: %s no longer routed", p)
				delete(have, p)
			}
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// assignedEIPs maps each Elastic IP assigned to a device of a node to
// that node's address. A block assigned to two devices (during a move)
// goes to the one assigned last, as Equinix routes it.
func (c *Cluster) assignedEIPs() map[string]string {
	byName := map[string]string{}
	for _, n := range c.Nodes {
		byName[n.Name] = n.IP
	}
	type hit struct {
		via string
		at  int
	}
	got := map[string]hit{}
	for _, d := range c.Emu.Devices(emulator.DefaultProjectID) {
		ip, ok := byName[d.Hostname]
		if !ok {
			continue
		}
		for i, a := range d.Addresses {
			if a.Management || !a.ReservationPrefix.Addr().Is4() {
				continue
			}
			p := a.ReservationPrefix.String()
			if h, ok := got[p]; !ok || i >= h.at {
				got[p] = hit{ip, i}
			}
		}
	}
	out := make(map[string]string, len(got))
	for p, h := range got {
		out[p] = h.via
	}
	return out
}

func (c *Cluster) routeOnRouters(op, prefix, via string) error {
	for _, r := range c.Routers {
		args := []string{"-n", r.Name, "route", op, prefix}
		if via != "" {
			args = append(args, "via", via, "proto", "static")
		}
		if err := run("ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// forwardAPIServer makes the control-plane node answer for kube-apiserver
// on its own address, as a control-plane node's kube-apiserver does: the
// CCM's health checks probe the nodes there before the control-plane EIP
// may go to one. kube-apiserver itself runs on the host (testenv), so the
// node DNATs its address and port to the host's, and masquerades so that
// the answers come back through it.
func (c *Cluster) forwardAPIServer(n *Node) error {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(c.Env.Config.Host, "https://"))
	if err != nil {
		return fmt.Errorf("cluster: kube-apiserver address %q: %w", c.Env.Config.Host, err)
	}
	rules := [][]string{
		{"-t", "nat", "-A", "PREROUTING", "-d", n.IP, "-p", "tcp", "--dport", port, "-j", "DNAT", "--to-destination", net.JoinHostPort(hostIP, port)},
		{"-t", "nat", "-A", "OUTPUT", "-d", n.IP, "-p", "tcp", "--dport", port, "-j", "DNAT", "--to-destination", net.JoinHostPort(hostIP, port)},
		{"-t", "nat", "-A", "POSTROUTING", "-d", hostIP, "-p", "tcp", "--dport", port, "-m", "conntrack", "--ctorigdst", n.IP, "-j", "MASQUERADE"},
	}
	for _, r := range rules {
		if err := inNS(n.NetNS, "iptables", r...); err != nil {
			return err
		}
	}
	return nil
}

// ControlPlaneEIP is the control-plane Elastic IP's address.
func (c *Cluster) ControlPlaneEIP() (string, error) {
	rs := c.Emu.ElasticReservations(emulator.DefaultProjectID, ControlPlaneEIPTag)
	if len(rs) != 1 {
		return "", fmt.Errorf("cluster: %d reservations tagged %s, want 1", len(rs), ControlPlaneEIPTag)
	}
	return rs[0].Prefix.Addr().String(), nil
}

// FabricRoutes are the routers' static routes (prefix -> next hop) for
// assigned Elastic IPs, sorted: what a test shows when the EIP is not
// reached.
func (c *Cluster) FabricRoutes() []string {
	var out []string
	for p, via := range c.assignedEIPs() {
		out = append(out, p+" via "+via)
	}
	sort.Strings(out)
	return out
}
