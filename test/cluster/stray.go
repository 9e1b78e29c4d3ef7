//go:build linux

package cluster

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Strays records each IPv4 packet that reaches the gateway for an address
// outside the cluster's own ranges: an Elastic IP, which the gateway has
// no route to. A router forwards one there when it has no route for the
// address (its default is the gateway), and a node when its kube-proxy has
// no rule for it yet or any more (the address is on no interface, so the
// node forwards it by its default route). The gateway answers the client
// with ICMP "network unreachable" (the client's "connect: network is
// unreachable"); this record names who sent the packet, which the client
// cannot see: the frame's source MAC is that node's or router's.
type Strays struct {
	f     *os.File
	names map[string]string // MAC -> node or router name
	done  chan struct{}

	mu   sync.Mutex
	seen []Stray
}

// Stray is one packet the gateway received for an address it has no
// route to.
type Stray struct {
	At       time.Time
	From     string // the node or router whose frame it was (its MAC when unknown)
	Src, Dst string // address:port
	Proto    string
	Flags    string // TCP's: S, A, F, R, P ("SA" a SYN-ACK)
}

func (s Stray) String() string {
	proto := s.Proto
	if s.Flags != "" {
		proto += " [" + s.Flags + "]"
	}
	return fmt.Sprintf("%s %s %s -> %s from %s", s.At.Format("15:04:05.000"), proto, s.Src, s.Dst, s.From)
}

// strayCap bounds what is kept: a Service's first second (before kube-proxy
// has its rule) sends some each time, and a long run keeps the newest.
const strayCap = 20000

// watchStrays starts recording on the gateway's bridge.
func (c *Cluster) watchStrays() (*Strays, error) {
	names := map[string]string{}
	for _, n := range c.Nodes {
		mac, err := linkMAC(n.NetNS, "eth0")
		if err != nil {
			return nil, err
		}
		names[mac] = n.Name
	}
	for _, r := range c.Routers {
		mac, err := linkMAC(r.Name, "fabric")
		if err != nil {
			return nil, err
		}
		names[mac] = r.Name
	}
	prog, err := bpf.Assemble(strayFilter())
	if err != nil {
		return nil, fmt.Errorf("cluster: stray filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	var fd int
	err = inNetNS(c.router, func() error {
		br, err := net.InterfaceByName("br0")
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		err = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]})
		if err == nil {
			// What the gateway itself sends out (the control-plane EIP
			// routed on to its node) is not a stray. Linux 4.20 and
			// later can leave it out; before, it is kept, and Between,
			// which asks for one Service's address, never shows it.
			_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
			err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: br.Index})
		}
		if err != nil {
			unix.Close(fd)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: watching the gateway for strays: %w", err)
	}
	s := &Strays{f: os.NewFile(uintptr(fd), "gateway-br0"), names: names, done: make(chan struct{})}
	go s.read()
	return s, nil
}

// strayFilter drops in the kernel all but IPv4 to an address outside
// 10.0.0.0/8 (nodes, pods, client, host) and 169.254.0.0/16 (the peers),
// and keeps 64 bytes of what it lets through: the bridge carries every
// node's traffic to kube-apiserver and to other nodes' pods, which the
// test must not copy.
func strayFilter() []bpf.Instruction {
	const drop = 9 // the index of the last instruction
	return []bpf.Instruction{
		0:    bpf.LoadAbsolute{Off: 12, Size: 2}, // EtherType
		1:    bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.ETH_P_IP, SkipTrue: drop - 2},
		2:    bpf.LoadAbsolute{Off: 30, Size: 4}, // IPv4 destination
		3:    bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xff000000},
		4:    bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x0a000000, SkipTrue: drop - 5},
		5:    bpf.LoadAbsolute{Off: 30, Size: 4},
		6:    bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xffff0000},
		7:    bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xa9fe0000, SkipTrue: drop - 8},
		8:    bpf.RetConstant{Val: 64},
		drop: bpf.RetConstant{Val: 0},
	}
}

func (s *Strays) read() {
	defer close(s.done)
	buf := make([]byte, 128)
	for {
		n, err := s.f.Read(buf)
		if err != nil {
			return
		}
		at := time.Now()
		if st, ok := s.parse(buf[:n]); ok {
			st.At = at
			s.mu.Lock()
			if len(s.seen) == strayCap {
				s.seen = append(s.seen[:0], s.seen[strayCap/2:]...)
			}
			s.seen = append(s.seen, st)
			s.mu.Unlock()
		}
	}
}

// parse reads an Ethernet frame carrying IPv4 (at least its first 64
// bytes): multicast and broadcast are not strays.
func (s *Strays) parse(b []byte) (Stray, bool) {
	if len(b) < 34 {
		return Stray{}, false
	}
	mac := net.HardwareAddr(b[6:12]).String()
	ip := b[14:]
	ihl := int(ip[0]&0x0f) * 4
	src, dst := net.IP(ip[12:16]), net.IP(ip[16:20])
	if dst.IsMulticast() || dst.Equal(net.IPv4bcast) {
		return Stray{}, false
	}
	from := s.names[mac]
	if from == "" {
		from = mac
	}
	st := Stray{From: from, Src: src.String(), Dst: dst.String()}
	switch ip[9] {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
		st.Proto = map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[ip[9]]
		if l4 := ip[ihl:]; ihl >= 20 && len(l4) >= 4 {
			st.Src = net.JoinHostPort(st.Src, fmt.Sprint(binary.BigEndian.Uint16(l4[0:2])))
			st.Dst = net.JoinHostPort(st.Dst, fmt.Sprint(binary.BigEndian.Uint16(l4[2:4])))
			if ip[9] == unix.IPPROTO_TCP && len(l4) >= 14 {
				for _, f := range []struct {
					bit  byte
					name string
				}{{0x02, "S"}, {0x01, "F"}, {0x04, "R"}, {0x08, "P"}, {0x10, "A"}} {
					if l4[13]&f.bit != 0 {
						st.Flags += f.name
					}
				}
			}
		}
	case unix.IPPROTO_ICMP:
		st.Proto = "icmp"
	default:
		st.Proto = fmt.Sprint(ip[9])
	}
	return st, true
}

// Between are the strays to ip received in [from, to], oldest first.
func (s *Strays) Between(ip string, from, to time.Time) []Stray {
	return s.where(func(st Stray) bool {
		host, _, err := net.SplitHostPort(st.Dst)
		if err != nil {
			host = st.Dst
		}
		return host == ip && !st.At.Before(from) && !st.At.After(to)
	})
}

// Flow are the strays of one flow (the same source and destination, with
// their ports), oldest first: a flow that met the gateway before may have
// left its sender a connection-tracking entry without kube-proxy's DNAT,
// which a new connection on the same ports then follows.
func (s *Strays) Flow(src, dst string) []Stray {
	return s.where(func(st Stray) bool { return st.Src == src && st.Dst == dst })
}

// where are the strays keep accepts, oldest first (none from a nil
// record).
func (s *Strays) where(keep func(Stray) bool) []Stray {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Stray
	for _, st := range s.seen {
		if keep(st) {
			out = append(out, st)
		}
	}
	return out
}

// Last is when the newest stray to any of ips arrived (zero when none
// did, or when nothing was recorded).
func (s *Strays) Last(ips ...string) time.Time {
	var last time.Time
	for _, ip := range ips {
		if sts := s.Between(ip, time.Time{}, time.Now()); len(sts) > 0 && sts[len(sts)-1].At.After(last) {
			last = sts[len(sts)-1].At
		}
	}
	return last
}

// Stop ends the recording.
func (s *Strays) Stop() {
	if s == nil {
		return
	}
	s.f.Close()
	<-s.done
}

// linkMAC is the MAC address of link dev in netns ns.
func linkMAC(ns, dev string) (string, error) {
	var mac string
	err := inNetNS(ns, func() error {
		i, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		mac = i.HardwareAddr.String()
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("cluster: the MAC of %s in %s: %w", dev, ns, err)
	}
	return mac, nil
}

// strayLines is Between as lines for a failure's message ("none" when
// there were none).
func (s *Strays) strayLines(ip string, from, to time.Time) string {
	sts := s.Between(ip, from, to)
	if len(sts) == 0 {
		return "  none"
	}
	var lines []string
	for _, st := range sts {
		lines = append(lines, "  "+st.String())
	}
	return strings.Join(lines, "\n")
}

// Tally counts the strays to ip in [from, to] by who sent them ("none"
// when there were none).
func (s *Strays) Tally(ip string, from, to time.Time) string {
	by := map[string]int{}
	for _, st := range s.Between(ip, from, to) {
		by[st.From]++
	}
	if len(by) == 0 {
		return "none"
	}
	return fmt.Sprint(by)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
