package instances

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzNodeIdentity fuzzes what the CCM reads from a Node to find its
// device and addresses: spec.providerID (DeviceID) and the kubelet's
// alpha.kubernetes.io/provided-node-ip annotation (nodeAddresses).
//
// DeviceID never panics; a refusal names the provider ID on one line; an
// accepted ID is a device ID (not empty, no slash or space) that the
// provider ID this CCM writes for it gives back. nodeAddresses lists the
// hostname first, then the annotation's addresses (canonical, in its
// order) as InternalIP, then the device's management addresses, each
// (type, address) once, and never the Elastic IP assigned to the device
// unless the annotation names it.
func FuzzNodeIdentity(f *testing.F) {
	for _, s := range [][2]string{
		{"equinixmetal://3f8f7d2e-0000-4000-8000-000000000001", ""},
		{"packet:///3F8F7D2E-0000-4000-8000-000000000001", "10.1.2.3"},
		{"3F8F7D2E-0000-4000-8000-000000000001", "192.168.0.5, 2604:1380::1"},
		{"aws:///us-east-1a/i-0123", "147.75.9.9,147.75.9.9,not-an-ip"},
		{"equinixmetal://", " ,, "},
		{"equinixmetal://a b", "::ffff:10.1.2.3,fe80::1%eth0"},
		{"", "10.1.2.3,147.75.1.2"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pid, nodeIP string) {
		id, err := DeviceID(pid)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, strconv.Quote(pid)) || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("DeviceID(%q): the error does not name it on one line: %q", pid, msg)
			}
		} else {
			if id == "" || strings.ContainsAny(id, "/ ") {
				t.Fatalf("DeviceID(%q) = %q", pid, id)
			}
			if again, err := DeviceID(providerID(id)); err != nil || again != id {
				t.Fatalf("DeviceID(%q) = %q; DeviceID(%q) = %q, %v", pid, id, providerID(id), again, err)
			}
		}

		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Annotations: map[string]string{providedNodeIPAnnotation: nodeIP}}}
		addrs, err := nodeAddresses(device(), node, Options{ExternalIPv6: true})
		if err != nil {
			t.Fatal(err)
		}
		if addrs[0] != (v1.NodeAddress{Type: v1.NodeHostName, Address: "worker-1"}) {
			t.Fatalf("the hostname is not first: %v", addrs)
		}
		var provided []string
		for _, s := range strings.Split(nodeIP, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && !slices.Contains(provided, a.String()) {
				provided = append(provided, a.String())
			}
		}
		seen := map[v1.NodeAddress]bool{}
		for i, a := range addrs {
			if seen[a] {
				t.Fatalf("%v twice: %v", a, addrs)
			}
			seen[a] = true
			if i == 0 {
				continue
			}
			if p, err := netip.ParseAddr(a.Address); err != nil || p.String() != a.Address {
				t.Fatalf("%q is not a canonical address: %v", a.Address, addrs)
			}
			if i <= len(provided) && (a.Type != v1.NodeInternalIP || a.Address != provided[i-1]) {
				t.Fatalf("provided-node-ip %q: addresses %v, want %q first", nodeIP, addrs, provided)
			}
			if a.Address == "147.75.9.9" && !slices.Contains(provided, a.Address) {
				t.Fatalf("the device's Elastic IP is a node address: %v", addrs)
			}
		}
	})
}
