//go:build linux

package cluster

import (
	"encoding/binary"
	"net"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// frame is an Ethernet frame from MAC src carrying an IPv4 packet from
// srcIP:sport to dstIP:dport of protocol proto (its first 20 bytes of
// payload only; a TCP segment is a SYN).
func frame(src string, etherType uint16, srcIP, dstIP string, proto byte, sport, dport uint16) []byte {
	b := make([]byte, 14+20+20)
	mac, _ := net.ParseMAC(src)
	copy(b[6:12], mac)
	binary.BigEndian.PutUint16(b[12:14], etherType)
	ip := b[14:]
	ip[0] = 0x45 // version 4, 20-byte header
	ip[9] = proto
	copy(ip[12:16], net.ParseIP(srcIP).To4())
	copy(ip[16:20], net.ParseIP(dstIP).To4())
	binary.BigEndian.PutUint16(ip[20:22], sport)
	binary.BigEndian.PutUint16(ip[22:24], dport)
	if proto == unix.IPPROTO_TCP {
		ip[20+13] = 0x02
	}
	return b
}

// The kernel keeps only what can be a stray, and parse names its sender.
func TestStrays(t *testing.T) {
	vm, err := bpf.NewVM(strayFilter())
	if err != nil {
		t.Fatal(err)
	}
	const node1 = "02:00:00:00:00:01"
	s := &Strays{names: map[string]string{node1: "node-1"}}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  string // "" = not a stray
	}{
		{"tcp to an Elastic IP", frame(node1, unix.ETH_P_IP, "10.203.0.4", "198.18.0.7", unix.IPPROTO_TCP, 40000, 80), "tcp [S] 10.203.0.4:40000 -> 198.18.0.7:80 from node-1"},
		{"udp from an unknown sender", frame("02:00:00:00:00:09", unix.ETH_P_IP, "10.203.0.4", "198.18.0.7", unix.IPPROTO_UDP, 40000, 90), "udp 10.203.0.4:40000 -> 198.18.0.7:90 from 02:00:00:00:00:09"},
		{"icmp", frame(node1, unix.ETH_P_IP, "10.203.0.4", "198.18.0.7", unix.IPPROTO_ICMP, 0, 0), "icmp 10.203.0.4 -> 198.18.0.7 from node-1"},
		{"to kube-apiserver on the host", frame(node1, unix.ETH_P_IP, "10.201.0.11", "10.200.0.1", unix.IPPROTO_TCP, 40000, 6443), ""},
		{"to another node's pod", frame(node1, unix.ETH_P_IP, "10.202.1.5", "10.202.2.5", unix.IPPROTO_TCP, 40000, 8080), ""},
		{"to a BGP peer", frame(node1, unix.ETH_P_IP, "10.201.0.11", "169.254.255.1", unix.IPPROTO_TCP, 40000, 179), ""},
		{"multicast", frame(node1, unix.ETH_P_IP, "10.201.0.11", "224.0.0.22", 2, 0, 0), ""},
		{"ARP", frame(node1, unix.ETH_P_ARP, "10.201.0.11", "198.18.0.7", 0, 0, 0), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, err := vm.Run(tc.frame)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if kept > 0 {
				if st, ok := s.parse(tc.frame[:min(kept, len(tc.frame))]); ok {
					got = st.String()[len("15:04:05.000 "):]
				}
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
