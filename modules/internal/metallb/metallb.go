// Package metallb holds what the two MetalLB built-ins (CRD mode and the
// legacy ConfigMap mode) agree on: which Services share an address pool, and
// which BGP sessions each node needs. It is pure: data in, data out.
package metallb

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/kubenames"
)

// DefaultNamespace is where MetalLB lives unless the URL says otherwise.
const DefaultNamespace = "metallb-system"

// HostnameLabel is the node label BGP peers are restricted by.
const HostnameLabel = "kubernetes.io/hostname"

// Pool is one address pool: the addresses of one Service, or of several
// Services that share their address.
type Pool struct {
	// Services are "<namespace>/<name>", sorted.
	Services []string
	// CIDRs are "<ip>/32" or "<ip>/128", IPv4 before IPv6, each family
	// sorted as strings (a dual-stack Service's pool holds one of each).
	CIDRs []string
	// SharingKey is set when every Service of the pool has the same
	// sharing key (either form of the allow-shared-ip annotation).
	SharingKey string
	// Location is where the pool's Elastic IPs are reserved (its IP is
	// empty), when the host located them (sdk.Service.Locations) and they
	// agree; the zero value when none is known. Only nodes there should
	// announce the pool: Equinix routes an Elastic IP in its metro alone.
	Location sdk.AddressLocation
}

// Located reports whether the pool's location is known.
func (p Pool) Located() bool { return p.Location.Metro != "" || p.Location.Facility != "" }

// NodeSelector is the node label, and its value, that picks the nodes
// where the pool's addresses are routed: the facility's
// (sdk.FacilityLabel) for a facility's reservation, else the metro's
// (sdk.MetroLabel). ok is false when the pool has no known location, or
// one no label value can hold.
func (p Pool) NodeSelector() (key, value string, ok bool) {
	key, value = sdk.MetroLabel, p.Location.Metro
	if p.Location.Facility != "" {
		key, value = sdk.FacilityLabel, p.Location.Facility
	}
	return key, value, value != "" && kubenames.ValidateLabelValue(value) == nil
}

// MetroFallback is, for a facility's pool whose metro is known, that metro:
// a node without FacilityLabel (one that upstream v3.8.1 initialised, which
// left the zone unset) is taken to be in the facility when its MetroLabel
// is the metro, so a take-over never leaves such a pool announced by no
// node. "" otherwise.
func (p Pool) MetroFallback() string {
	if p.Location.Facility == "" || p.Location.Metro == "" || kubenames.ValidateLabelValue(p.Location.Metro) != nil {
		return ""
	}
	return p.Location.Metro
}

// Selects reports whether a node with these labels is where the pool's
// addresses are routed, as NodeSelector and MetroFallback say; a pool
// without a usable location selects every node.
func (p Pool) Selects(labels map[string]string) bool {
	key, value, ok := p.NodeSelector()
	if !ok {
		return true
	}
	if labels[key] == value {
		return true
	}
	_, zoned := labels[sdk.FacilityLabel]
	m := p.MetroFallback()
	return m != "" && !zoned && labels[sdk.MetroLabel] == m
}

// Shared reports whether the pool serves more than one Service.
func (p Pool) Shared() bool { return len(p.Services) > 1 }

// Pools groups Services into pools. Services that have an address in common
// end up in one pool: MetalLB refuses two pools with the same address, so
// one pool per Service would break the whole configuration. When Services
// share an address without a common allow-shared-ip key the pool is still
// merged, and a warning says that MetalLB will serve only one of them.
func Pools(services []sdk.Service) (pools []Pool, warnings []string) {
	entries, warnings := poolEntries(services)
	pools, mixed := mergePools(entries, addressGroups(entries))
	return pools, finishPools(pools, mixed, warnings)
}

// poolEntry is a Service as Pools groups it. Entries stay small (no copy
// of the Service): sorting moves them, and in the Wasm guest every byte
// moved costs.
type poolEntry struct {
	id, key string
	cidr    []string
	locs    []sdk.AddressLocation
}

// poolEntries is an entry per Service with an address, sorted by
// "<namespace>/<name>", and a warning per address that is not one.
func poolEntries(services []sdk.Service) (entries []poolEntry, warnings []string) {
	entries = make([]poolEntry, 0, len(services))
	for _, s := range services {
		e := poolEntry{id: s.Namespace + "/" + s.Name, key: s.SharingKey, locs: s.Locations}
		for _, ip := range s.IPs {
			cidr, err := hostCIDR(ip)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("Service %s has the address %q, which is not an IP address; it gets no pool", e.id, ip))
				continue
			}
			e.cidr = append(e.cidr, cidr)
		}
		if len(e.cidr) == 0 {
			continue
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b poolEntry) int { return strings.Compare(a.id, b.id) })
	return entries, warnings
}

// addressGroups is, for each entry, the root of its group: union-find
// over entries connected by a common address. A root is always the
// smallest index of its group, so walking the entries in order meets each
// group's root first and the pools come out in the order of their first
// Service.
func addressGroups(entries []poolEntry) (root []int) {
	parent := make([]int, len(entries))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	owner := make(map[string]int, len(entries))
	for i, e := range entries {
		for _, c := range e.cidr {
			if j, ok := owner[c]; ok {
				a, b := find(i), find(j)
				if a < b {
					a, b = b, a
				}
				parent[a] = b
			} else {
				owner[c] = i
			}
		}
	}
	root = make([]int, len(entries))
	for i := range root {
		root[i] = find(i)
	}
	return root
}

// poolMix says what the Services merged into one pool disagree on; the
// pool then keeps neither (finishPools).
type poolMix struct{ keys, locs bool }

// mergePools makes a pool per group (root, from addressGroups), in the
// order of the groups' first entries, with the Services and addresses of
// its entries, the first entry's sharing key and the first location
// known; and, per pool, whether its entries disagree on those.
func mergePools(entries []poolEntry, root []int) (pools []Pool, mixed []poolMix) {
	poolOf := make([]int, len(entries)) // by root
	mixed = make([]poolMix, 0, len(entries))
	for i, e := range entries {
		r := root[i]
		if r == i {
			poolOf[i] = len(pools)
			pools = append(pools, Pool{SharingKey: e.key})
			mixed = append(mixed, poolMix{})
		}
		k := poolOf[r]
		p := &pools[k]
		p.Services = append(p.Services, e.id)
		p.CIDRs = append(p.CIDRs, e.cidr...)
		if e.key != p.SharingKey {
			mixed[k].keys = true
		}
		for _, l := range e.locs {
			l.IP = ""
			if l.Metro == "" && l.Facility == "" {
				continue
			}
			if !p.Located() {
				p.Location = l
			} else if l != p.Location {
				mixed[k].locs = true
			}
		}
	}
	return pools, mixed
}

// finishPools sorts each pool's addresses (a shared address once), drops
// the sharing key and location its Services disagree on, and appends to
// warnings what MetalLB will make of such a pool.
func finishPools(pools []Pool, mixed []poolMix, warnings []string) []string {
	for k := range pools {
		p := &pools[k]
		if len(p.CIDRs) > 1 {
			slices.SortFunc(p.CIDRs, compareCIDRs)
			p.CIDRs = slices.Compact(p.CIDRs)
		}
		if mixed[k].keys {
			p.SharingKey = ""
		}
		if mixed[k].locs {
			warnings = append(warnings, fmt.Sprintf("the addresses of %s are reserved in different places (%s and another); they are announced from every BGP node, as if their location were unknown", strings.Join(p.Services, ", "), where(p.Location)))
			p.Location = sdk.AddressLocation{}
		}
		if p.Shared() && p.SharingKey == "" {
			warnings = append(warnings, fmt.Sprintf("Services %s share an address without a common sharing key (metallb.io/allow-shared-ip or metallb.universe.tf/allow-shared-ip); MetalLB will serve only one of them; give them the same key or separate addresses", strings.Join(p.Services, ", ")))
		}
	}
	return warnings
}

// Outside counts the located pools that some of nodes, being elsewhere
// (another label value, or none), would announce if every node announced
// every pool; and names one such pool and node, for a message.
func Outside(pools []Pool, nodes []sdk.Node) (n int, pool, node string) {
	for _, p := range pools {
		if _, _, ok := p.NodeSelector(); !ok {
			continue
		}
		for _, nd := range nodes {
			if !p.Selects(nd.Labels) {
				if n == 0 {
					pool, node = strings.Join(p.CIDRs, ","), nd.Name
				}
				n++
				break
			}
		}
	}
	return n, pool, node
}

// where names a location for a message: "metro sv" or "facility da11".
func where(l sdk.AddressLocation) string {
	if l.Facility != "" {
		return "facility " + l.Facility
	}
	return "metro " + l.Metro
}

// compareCIDRs orders a pool's host CIDRs: IPv4 before IPv6, so that a
// shared pool named after its first address keeps the name of its IPv4
// address when an IPv6 one joins it; within a family as strings, the
// order IPv4 pools always had.
func compareCIDRs(a, b string) int {
	if a6, b6 := isIPv6CIDR(a), isIPv6CIDR(b); a6 != b6 {
		if a6 {
			return 1
		}
		return -1
	}
	return strings.Compare(a, b)
}

// isIPv6CIDR: hostCIDR's output contains a colon only for IPv6.
func isIPv6CIDR(c string) bool { return strings.Contains(c, ":") }

// IPv6 reports whether the pool holds an IPv6 address.
func (p Pool) IPv6() bool { return slices.ContainsFunc(p.CIDRs, isIPv6CIDR) }

func hostCIDR(ip string) (string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String(), nil
}

// Session is one BGP session: a node and one of its peers.
type Session struct {
	Node     string
	Hostname string // the node's kubernetes.io/hostname label, else its name
	Index    int    // the peer's index in the node's peers of its family sorted by IP
	LocalASN uint32
	// SourceIP is the node's source address of the session's family:
	// sdk.Node.SourceIP, or SourceIPv6 for an IPv6 session.
	SourceIP string
	Peer     sdk.Peer
	IPv6     bool // the peer is IPv6 (sdk.IsIPv6)
}

// EBGPMultiHop reports whether MetalLB should be told the session is
// multihop (BGPPeer ebgpMultiHop, the ConfigMap's ebgp-multihop): Equinix
// says so of the peer and the session is eBGP. MetalLB refuses multihop on
// an iBGP peer ("invalid ebgp-multihop parameter set for an ibgp peer").
func (s Session) EBGPMultiHop() bool { return s.Peer.Multihop && s.Peer.ASN != s.LocalASN }

// Sessions lists every node × IPv4 peer, by node name then peer IP, so that
// Index matches the {{n}} of the node annotations (which carry the IPv4
// peers alone). A peer whose IP is no IPv6 address counts as IPv4, as every
// peer did before IPv6.
func Sessions(nodes []sdk.Node) []Session { return sessions(nodes, false) }

// SessionsV6 lists every node × IPv6 peer, by node name then peer IP,
// each from the node's SourceIPv6; Index counts the node's IPv6 peers
// alone (Equinix's IPv6 sessions are separate from the IPv4 ones).
func SessionsV6(nodes []sdk.Node) []Session { return sessions(nodes, true) }

func sessions(nodes []sdk.Node, v6 bool) []Session {
	nodes = append([]sdk.Node(nil), nodes...)
	slices.SortFunc(nodes, func(a, b sdk.Node) int { return strings.Compare(a.Name, b.Name) })
	var out []Session
	for _, n := range nodes {
		peers := make([]sdk.Peer, 0, len(n.Peers))
		for _, p := range n.Peers {
			if sdk.IsIPv6(p.IP) == v6 {
				peers = append(peers, p)
			}
		}
		slices.SortStableFunc(peers, func(a, b sdk.Peer) int { return strings.Compare(a.IP, b.IP) })
		host := n.Labels[HostnameLabel]
		if host == "" {
			host = n.Name
		}
		src := n.SourceIP
		if v6 {
			src = n.SourceIPv6
		}
		for i, p := range peers {
			out = append(out, Session{Node: n.Name, Hostname: host, Index: i, LocalASN: n.LocalASN, SourceIP: src, Peer: p, IPv6: v6})
		}
	}
	return out
}

// ObjectName makes a valid object name (DNS-1123 subdomain) from parts
// joined by sep. Kubernetes names are already valid, so normally the result
// is the plain join; anything that had to be changed or shortened gets a
// short hash of the original, so two different inputs never share a name.
func ObjectName(sep string, parts ...string) string {
	orig := strings.Join(parts, sep)
	if validName(orig) {
		return orig
	}
	var b strings.Builder
	for _, r := range strings.ToLower(orig) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-.")
	if name == orig && len(name) <= 253 && name != "" {
		return name
	}
	sum := sha256.Sum256([]byte(orig))
	suffix := hex.EncodeToString(sum[:])[:8]
	if max := 253 - len(suffix) - 1; len(name) > max {
		name = strings.TrimRight(name[:max], "-.")
	}
	if name == "" {
		return "x-" + suffix
	}
	return name + "-" + suffix
}

// validName is the common case of ObjectName, checked without building a
// copy: lower-case letters, digits, '-' and '.', neither first nor last.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return s[0] != '-' && s[0] != '.' && s[len(s)-1] != '-' && s[len(s)-1] != '.'
}

// PeerName names the BGP session of node's peer number index, upstream's
// "<node>-<index>".
func PeerName(node string, index int) string {
	return ObjectName("-", node, strconv.Itoa(index))
}

// PeerNameV6 names the BGP session of node's IPv6 peer number index:
// "<node>-<index>-v6". It never equals a PeerName, of this node or another:
// a PeerName ends in "-<digits>", this one in "-v6" ("<node>-v6-<index>"
// would be the PeerName of a node named "<node>-v6"); and the IPv4 names
// stay as they were.
func PeerNameV6(node string, index int) string {
	return ObjectName("-", node, strconv.Itoa(index), "v6")
}

// Namespace is the MetalLB namespace from the options.
func Namespace(o sdk.Options) string {
	if o.Namespace == "" {
		return DefaultNamespace
	}
	return o.Namespace
}

// WithoutIPv6 is services without their IPv6 addresses (sdk.IsIPv6),
// those left with no address left out, and the Services that had one
// ("<namespace>/<name>"). services is not changed.
func WithoutIPv6(services []sdk.Service) (out []sdk.Service, v6 []string) {
	out = make([]sdk.Service, 0, len(services))
	for _, s := range services {
		if !slices.ContainsFunc(s.IPs, sdk.IsIPv6) {
			out = append(out, s)
			continue
		}
		v6 = append(v6, s.Namespace+"/"+s.Name)
		var ips []string
		for _, ip := range s.IPs {
			if !sdk.IsIPv6(ip) {
				ips = append(ips, ip)
			}
		}
		if len(ips) == 0 {
			continue
		}
		var locs []sdk.AddressLocation
		for _, l := range s.Locations {
			if !sdk.IsIPv6(l.IP) {
				locs = append(locs, l)
			}
		}
		s.IPs, s.Locations = ips, locs
		out = append(out, s)
	}
	return out, v6
}

// BGPTypeParam is the module parameter (a query parameter of the
// loadbalancer URL, metallb:///<ns>?bgpType=frr) saying how MetalLB's
// speakers run: native (the default, as MetalLB's metallb-native.yaml),
// frr or frr-k8s, MetalLB's own METALLB_BGP_TYPE values.
const BGPTypeParam = "bgpType"

// AnnouncesIPv6 reports whether MetalLB, as the options describe it,
// announces IPv6: in FRR modes only. In native mode MetalLB refuses its
// whole configuration once a pool it announces over BGP holds an IPv6
// address, which would stop every change for IPv4 Services too.
func AnnouncesIPv6(o sdk.Options) bool { return FRRMode(o) }

// FRRMode reports whether MetalLB's speakers speak BGP through FRR
// (bgpType frr or frr-k8s), not natively.
func FRRMode(o sdk.Options) bool {
	switch o.Params[BGPTypeParam] {
	case "frr", "frr-k8s":
		return true
	}
	return false
}

// The module parameters of the BGP timers (query parameters of the
// loadbalancer URL, or the CCM's bgpHoldTime and bgpKeepaliveTime, which
// the host passes as these): how soon the routers give up on a node that
// stopped answering, and so how long they send it traffic after it died.
// Unset, MetalLB's defaults stand (hold 90 s, keepalive a third of it).
const (
	HoldTimeParam      = "holdTime"
	KeepaliveTimeParam = "keepaliveTime"
)

// Timers are the BGP timers the options ask for, in whole seconds; zero is
// unset.
type Timers struct{ Hold, Keepalive int }

// TimersFrom reads and checks the timer parameters. A hold time is 3 to
// 65535 seconds (RFC 4271; its 0, "never expire", is refused: a dead node
// would keep its routes for ever), a keepalive at least 1 second and below
// the hold time (MetalLB refuses others).
func TimersFrom(o sdk.Options) (Timers, error) {
	var t Timers
	var err error
	if t.Hold, err = seconds(o.Params, HoldTimeParam); err != nil {
		return t, err
	}
	if t.Keepalive, err = seconds(o.Params, KeepaliveTimeParam); err != nil {
		return t, err
	}
	if t.Hold != 0 && (t.Hold < 3 || t.Hold > 65535) {
		return t, fmt.Errorf("%s %ds is out of range; use 3s to 65535s", HoldTimeParam, t.Hold)
	}
	hold := t.Hold
	if hold == 0 {
		hold = 90 // MetalLB's default
	}
	if t.Keepalive != 0 && t.Keepalive >= hold {
		return t, fmt.Errorf("%s %ds must be shorter than the hold time (%ds); use at most a third of it", KeepaliveTimeParam, t.Keepalive, hold)
	}
	return t, nil
}

// seconds reads a duration parameter of whole seconds ("9s", "1m").
func seconds(params map[string]string, name string) (int, error) {
	v, ok := params[name]
	if !ok || v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d%time.Second != 0 {
		return 0, fmt.Errorf("%s %q is not a whole number of seconds; write it as 9s or 1m", name, v)
	}
	return int(d / time.Second), nil
}

// Duration is a timer as MetalLB's CRDs and ConfigMap write it.
func Duration(s int) string { return strconv.Itoa(s) + "s" }
