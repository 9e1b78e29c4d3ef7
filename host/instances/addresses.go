package instances

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
)

// providedNodeIPAnnotation is set by the kubelet from --node-ip when it runs
// with --cloud-provider=external.
const providedNodeIPAnnotation = "alpha.kubernetes.io/provided-node-ip"

// nodeAddresses derives a node's addresses from its device.
//
// The kubelet's --node-ip comes first as InternalIP: users on Layer 2 VLANs
// or with private Elastic IPs set it because the API cannot know which
// address the cluster should use. An address the API also reports is then
// listed once. Only management addresses of the device are used besides
// that, so an Elastic IP that happens to be assigned to the node (the
// control-plane EIP, which moves between nodes) is never a node address.
// The public IPv6 is an ExternalIP only with o.ExternalIPv6 (upstream lists
// no IPv6; see Options).
func nodeAddresses(device *metalv1.Device, node *v1.Node, o Options) ([]v1.NodeAddress, error) {
	var out []v1.NodeAddress
	seen := map[string]bool{}
	add := func(t v1.NodeAddressType, addr string) {
		key := string(t) + "/" + addr
		if addr == "" || seen[key] {
			return
		}
		seen[key] = true
		out = append(out, v1.NodeAddress{Type: t, Address: addr})
	}

	if h := device.GetHostname(); h != "" {
		add(v1.NodeHostName, h)
	}
	provided := map[string]bool{}
	if node != nil {
		for _, s := range strings.Split(node.Annotations[providedNodeIPAnnotation], ",") {
			ip, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				continue
			}
			provided[ip.String()] = true
			add(v1.NodeInternalIP, ip.String())
		}
	}

	for _, a := range device.IpAddresses {
		addr, err := netip.ParseAddr(a.GetAddress())
		if err != nil {
			continue
		}
		if provided[addr.String()] {
			continue // already listed as InternalIP from --node-ip
		}
		if !a.GetManagement() {
			continue
		}
		switch {
		case addr.Is4() && !a.GetPublic():
			add(v1.NodeInternalIP, addr.String())
		case a.GetPublic() && (addr.Is4() || o.ExternalIPv6):
			add(v1.NodeExternalIP, addr.String())
		}
	}

	hasIP := false
	for _, a := range out {
		if a.Type != v1.NodeHostName {
			hasIP = true
		}
	}
	if !hasIP {
		return nil, fmt.Errorf("device %s (%s) has no IP addresses yet; the node is initialised once the device has its management addresses", device.GetId(), device.GetHostname())
	}
	return out, nil
}

// PrivateIPv4Network returns the CIDR of the private management network
// (parent block), for the network-4-private node annotation.
func PrivateIPv4Network(device *metalv1.Device) (string, bool) {
	for _, a := range device.IpAddresses {
		if a.GetAddressFamily() != 4 || a.GetPublic() || !a.GetManagement() {
			continue
		}
		pb, ok := a.GetParentBlockOk()
		if !ok || pb.GetNetwork() == "" {
			continue
		}
		return fmt.Sprintf("%s/%d", pb.GetNetwork(), pb.GetCidr()), true
	}
	return "", false
}

// PrivateIPv4 returns the device's private management IPv4, the BGP source
// address.
func PrivateIPv4(device *metalv1.Device) (string, bool) {
	for _, a := range device.IpAddresses {
		if a.GetAddressFamily() == 4 && !a.GetPublic() && a.GetManagement() && a.GetAddress() != "" {
			return a.GetAddress(), true
		}
	}
	return "", false
}
