package main

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Module is the BIRD example. Its handlers are plain Go in this untagged
// file so that `go test` runs them natively; main.go registers it for Wasm.
var Module = sdk.Module{Name: "bird", Version: "0.1.0", Describe: describe, Generate: generate}

// The module's options, from the query of the loadbalancer URL.
const (
	// ParamNamespace is where the ConfigMap goes. It is required: the module
	// must declare its namespace in describe, before it sees any cluster
	// data, and there is no namespace every cluster has that suits BIRD.
	ParamNamespace = "namespace"
	// ParamName overrides the ConfigMap's name.
	ParamName = "name"

	// ParamHoldTime and ParamKeepaliveTime are the BGP timers in whole
	// seconds ("9s"): how soon the routers give up on a node that stopped
	// answering, and so how long they send it traffic after it died. The
	// CCM passes its bgpHoldTime and bgpKeepaliveTime to every module as
	// these; unset, BIRD's defaults stand (hold 240 s, keepalive a third).
	ParamHoldTime      = "holdTime"
	ParamKeepaliveTime = "keepaliveTime"
	// ParamBFDInterval (whole milliseconds, "300ms") turns BFD on;
	// ParamBFDMultiplier is how many packets in a row may be lost before
	// the peer is down. The CCM passes its bgpBFDInterval and
	// bgpBFDMultiplier as these.
	ParamBFDInterval   = "bfdInterval"
	ParamBFDMultiplier = "bfdMultiplier"
)

// knownOptions are the options parseOptions accepts.
var knownOptions = map[string]bool{
	ParamNamespace: true, ParamName: true,
	ParamHoldTime: true, ParamKeepaliveTime: true,
	ParamBFDInterval: true, ParamBFDMultiplier: true,
}

// defaultHoldTime is what a keepaliveTime set alone is checked against:
// MetalLB's default, which the CCM checks bgpKeepaliveTime against too, so
// the module refuses exactly what the CCM refuses (BIRD's own default, 240
// s, would allow more).
const defaultHoldTime = 90

// defaultBFDMultiplier is BIRD's, FRR's and MetalLB's: three lost packets
// in a row and the peer is down.
const defaultBFDMultiplier = 3

// DefaultName is the ConfigMap's name when the URL does not set name=.
const DefaultName = "bird"

// ServicesKey is the ConfigMap key holding the Service routes and the export
// filter, which every node's configuration includes. The underscore keeps it
// apart from the node keys: a node name (a DNS subdomain) never contains one,
// so no node can be called "ccm_services".
const ServicesKey = "ccm_services.conf"

// Names of BIRD symbols the node configurations refer to.
const (
	staticProtocol = "ccm_services"
	exportFilter   = "ccm_export"
)

// maxConfigMapBytes is what the API server accepts in a ConfigMap's data
// (1 MiB, keys included). Failing here gives a clear message instead of a
// rejected apply.
const maxConfigMapBytes = 1 << 20

// appLabel marks the ConfigMap for people (kubectl get cm -l ...); the host
// adds its own ownership label, which the module must not set.
const appLabel = "app.kubernetes.io/name"

// settings are the validated options.
type settings struct {
	namespace, name string
	timers          timers
	bfd             bfd
}

// timers are the BGP timers in whole seconds; zero leaves BIRD's default.
type timers struct{ hold, keepalive int }

// bfd is the BFD interval in milliseconds (zero: BFD off) and multiplier.
type bfd struct{ intervalMs, multiplier int }

func (f bfd) on() bool { return f.intervalMs != 0 }

// parseOptions validates the URL's query. Unknown parameters are errors, so
// a typo (nampespace=) is a clear start-up error rather than a default.
func parseOptions(o sdk.Options) (settings, error) {
	keys := make([]string, 0, len(o.Params))
	for k := range o.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !knownOptions[k] {
			return settings{}, fmt.Errorf("does not know the option %q; it takes namespace=<ns> (required), name=<configmap> (default %s), holdTime and keepaliveTime (whole seconds, for example 9s and 3s), bfdInterval (whole milliseconds, for example 300ms) and bfdMultiplier (2 to 255)", k, DefaultName)
		}
	}
	s := settings{namespace: o.Params[ParamNamespace], name: o.Params[ParamName]}
	if s.namespace == "" {
		return settings{}, fmt.Errorf("needs the namespace of its ConfigMap; add ?namespace=<ns> to the loadbalancer URL, for example wasm:///etc/ccm/modules/bird.wasm?namespace=bird")
	}
	if !isDNSLabel(s.namespace) {
		return settings{}, fmt.Errorf("has namespace=%q, which is not a valid namespace name (lower-case letters, digits and '-', at most 63)", s.namespace)
	}
	if s.name == "" {
		s.name = DefaultName
	}
	if !isDNSSubdomain(s.name) {
		return settings{}, fmt.Errorf("has name=%q, which is not a valid ConfigMap name (lower-case letters, digits, '-' and '.', at most 253)", s.name)
	}
	var err error
	if s.timers, err = parseTimers(o.Params); err != nil {
		return settings{}, err
	}
	if s.bfd, err = parseBFD(o.Params); err != nil {
		return settings{}, err
	}
	return s, nil
}

// parseTimers reads and checks holdTime and keepaliveTime with the CCM's
// ranges (MetalLB's, which BIRD accepts too): a hold time of 3 to 65535
// seconds (RFC 4271; its 0, "never expire", would keep a dead node's
// routes for ever), a keepalive of at least 1 second and below the hold
// time. An empty value is unset, as the CCM leaves an unset timer.
func parseTimers(params map[string]string) (timers, error) {
	var t timers
	var err error
	if t.hold, err = wholeSeconds(params, ParamHoldTime); err != nil {
		return timers{}, err
	}
	if t.keepalive, err = wholeSeconds(params, ParamKeepaliveTime); err != nil {
		return timers{}, err
	}
	if v := params[ParamHoldTime]; v != "" && (t.hold < 3 || t.hold > 65535) {
		return timers{}, fmt.Errorf("%s %s is out of range; use 3s to 65535s", ParamHoldTime, v)
	}
	hold := t.hold
	if hold == 0 {
		hold = defaultHoldTime
	}
	if v := params[ParamKeepaliveTime]; v != "" && (t.keepalive < 1 || t.keepalive >= hold) {
		return timers{}, fmt.Errorf("%s %s is out of range; use at least 1s and less than the hold time (%ds), at most a third of it", ParamKeepaliveTime, v, hold)
	}
	return t, nil
}

// wholeSeconds reads a duration option of whole seconds ("9s", "1m");
// unset or empty is 0. The range is the caller's to check.
func wholeSeconds(params map[string]string, name string) (int, error) {
	v := params[name]
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d%time.Second != 0 {
		return 0, fmt.Errorf("%s %q is not a whole number of seconds; write it as 9s or 1m", name, v)
	}
	return int(d / time.Second), nil
}

// parseBFD reads and checks bfdInterval and bfdMultiplier with the CCM's
// ranges (MetalLB's BFDProfile's, within BIRD's): an interval of 10 ms to
// 60 s in whole milliseconds, a multiplier of 2 to 255 that only means
// something with an interval.
func parseBFD(params map[string]string) (bfd, error) {
	var f bfd
	if v := params[ParamBFDInterval]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d%time.Millisecond != 0 {
			return bfd{}, fmt.Errorf("%s %q is not a whole number of milliseconds; write it as 300ms or 1s", ParamBFDInterval, v)
		}
		if d < 10*time.Millisecond || d > time.Minute {
			return bfd{}, fmt.Errorf("%s %s is out of range; use 10ms to 60s", ParamBFDInterval, v)
		}
		f.intervalMs = int(d / time.Millisecond)
	}
	if v := params[ParamBFDMultiplier]; v != "" {
		if !f.on() {
			return bfd{}, fmt.Errorf("%s %s is set without %s; set %s (for example 300ms) to turn BFD on", ParamBFDMultiplier, v, ParamBFDInterval, ParamBFDInterval)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > 255 {
			return bfd{}, fmt.Errorf("%s %q is out of range; use a whole number from 2 to 255", ParamBFDMultiplier, v)
		}
		f.multiplier = n
	}
	if f.on() && f.multiplier == 0 {
		f.multiplier = defaultBFDMultiplier
	}
	return f, nil
}

// describe declares exactly one kind, ConfigMap, in exactly the namespace of
// the options: the host then refuses anything else the module might emit and
// prunes only ConfigMaps there that it applied for this module. The module
// reads nothing: its output depends on the snapshot alone.
func describe(o sdk.Options) (sdk.Description, error) {
	s, err := parseOptions(o)
	if err != nil {
		return sdk.Description{}, err
	}
	return sdk.Description{Emits: []sdk.ObjectKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: s.namespace}}}, nil
}

// generate returns one ConfigMap holding a BIRD configuration per BGP node
// (key <node>.conf) and the shared Service routes (key ccm_services.conf).
//
// One ConfigMap with a key per node, rather than a ConfigMap per node,
// because a DaemonSet's pods share one pod template: they can all mount one
// ConfigMap and pick their own file with the downward API
// (bird -c /etc/bird/ccm/$(NODE_NAME).conf), while a ConfigMap per node
// cannot be mounted by a DaemonSet at all. The routes, identical on every
// node, are written once and included, so the ConfigMap grows with
// nodes + Services rather than nodes × Services and stays far below its
// 1 MiB limit for realistic clusters.
//
// It is a pure function of req: nodes, peers and addresses are sorted here,
// whatever order the host used, and nothing else goes into the text. The BGP
// password appears only in the rendered configuration: never in a warning
// or an error.
func generate(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	s, err := parseOptions(req.Options)
	if err != nil {
		return sdk.GenerateResponse{}, err
	}
	var resp sdk.GenerateResponse
	routes, warnings := announcements(req.Services)
	resp.Warnings = append(resp.Warnings, warnings...)

	data := map[string]any{ServicesKey: renderServices(routes)}
	size := len(ServicesKey) + len(data[ServicesKey].(string))

	nodes := append([]sdk.Node(nil), req.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		conf, err := renderNode(n, s)
		if err != nil {
			// One node's bad data must not stop BIRD on the others; its pod
			// finds no file and fails visibly, and the warning says why.
			resp.Warnings = append(resp.Warnings, fmt.Sprintf("node %s gets no BIRD configuration: %v", n.Name, err))
			continue
		}
		key := n.Name + ".conf"
		data[key] = conf
		size += len(key) + len(conf)
	}
	if size > maxConfigMapBytes {
		return sdk.GenerateResponse{}, fmt.Errorf("would write %d bytes of BIRD configuration (%d nodes, %d addresses) into ConfigMap %s/%s, over the 1 MiB a ConfigMap holds; split the Services over several clusters or use a module that writes one object per node", size, len(nodes), len(routes), s.namespace, s.name)
	}

	resp.Objects = []sdk.Object{{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      s.name,
			"namespace": s.namespace,
			"labels":    map[string]any{appLabel: "bird"},
		},
		"data": data,
	}}
	return resp, nil
}

// route is one announced address and the Services that use it.
type route struct {
	addr     netip.Addr
	services []string // namespace/name, sorted
}

// announcements collects each distinct IPv4 address once, however many
// Services share it (metallb.universe.tf/allow-shared-ip), sorted
// numerically. Addresses it cannot announce are warnings, not errors: the
// other Services still get their routes.
func announcements(svcs []sdk.Service) ([]route, []string) {
	byAddr := map[netip.Addr][]string{}
	var warnings []string
	for _, svc := range svcs {
		id := svc.Namespace + "/" + svc.Name
		for _, ip := range svc.IPs {
			a, err := netip.ParseAddr(ip)
			switch {
			case err != nil:
				warnings = append(warnings, fmt.Sprintf("Service %s has the address %q, which is not an IP address; it is not announced", id, ip))
				continue
			case !a.Is4():
				// Equinix Metal Elastic IPs for Services are IPv4; an IPv6
				// announcement needs an ipv6 channel this example leaves out.
				warnings = append(warnings, fmt.Sprintf("Service %s has the address %s; this module announces IPv4 only, so it is not announced", id, ip))
				continue
			}
			byAddr[a] = append(byAddr[a], id)
		}
	}
	routes := make([]route, 0, len(byAddr))
	for a, ids := range byAddr {
		sort.Strings(ids)
		routes = append(routes, route{addr: a, services: dedupe(ids)})
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].addr.Less(routes[j].addr) })
	sort.Strings(warnings)
	return routes, warnings
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

const header = "# Generated by the bird load-balancer module of cloud-provider-equinix-metal.\n" +
	"# Do not edit: the cloud controller manager rewrites this ConfigMap on every change.\n"

// renderServices writes the static protocol that originates the Service
// routes and the filter that lets exactly those routes out. The routes are
// blackholes: BIRD only announces them, and kube-proxy (which already claims
// LoadBalancer addresses on every node) delivers the traffic.
func renderServices(routes []route) string {
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "# The Service addresses every BGP node announces (%d).\n\n", len(routes))
	fmt.Fprintf(&b, "protocol static %s {\n\tipv4;\n", staticProtocol)
	for _, r := range routes {
		fmt.Fprintf(&b, "\troute %s/32 blackhole; # %s\n", r.addr, strings.Join(r.services, ", "))
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(&b, "# Announce exactly the addresses above, whatever else BIRD learns.\nfilter %s {\n", exportFilter)
	if len(routes) == 0 {
		b.WriteString("\treject;\n}\n")
		return b.String()
	}
	b.WriteString("\tif net ~ [\n")
	for i, r := range routes {
		sep := ","
		if i == len(routes)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "\t\t%s/32%s\n", r.addr, sep)
	}
	b.WriteString("\t] then accept;\n\treject;\n}\n")
	return b.String()
}

// renderNode writes one node's bird.conf: a router id, the device protocol,
// the shared routes, BFD if the options ask for it and a BGP session per
// peer, in order of peer address.
func renderNode(n sdk.Node, s settings) (string, error) {
	if len(n.Name)+len(".conf") > 253 {
		return "", fmt.Errorf("its name is too long for a ConfigMap key")
	}
	src, err := netip.ParseAddr(n.SourceIP)
	if err != nil || !src.Is4() {
		return "", fmt.Errorf("its BGP source address %q is not an IPv4 address", n.SourceIP)
	}
	if n.LocalASN == 0 {
		return "", fmt.Errorf("it has no local ASN")
	}
	peers, err := nodePeers(n)
	if err != nil {
		return "", err
	}

	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "# BIRD 2 configuration of node %s: bird -c <mount>/%s.conf\n\n", n.Name, n.Name)
	fmt.Fprintf(&b, "router id %s;\n\n", src)
	b.WriteString("# Interface state, which BGP needs to reach its neighbours.\nprotocol device {\n}\n\n")
	fmt.Fprintf(&b, "# The Service routes and the export filter %s; BIRD resolves the name\n# next to this file.\ninclude \"%s\";\n", exportFilter, ServicesKey)
	if s.bfd.on() {
		writeBFD(&b, s.bfd)
	}
	if len(peers) == 0 {
		b.WriteString("\n# This node has no BGP peers yet.\n")
	}
	for _, p := range peers {
		writeBGP(&b, src, n.LocalASN, p, s)
	}
	return b.String(), nil
}

// peer is one IPv4 BGP neighbour of a node, its address parsed.
type peer struct {
	addr netip.Addr
	sdk.Peer
}

// nodePeers checks n's IPv4 peers and sorts them by address.
func nodePeers(n sdk.Node) ([]peer, error) {
	peers := make([]peer, 0, len(n.Peers))
	for _, p := range n.Peers {
		if sdk.IsIPv6(p.IP) {
			// The node's IPv6 sessions (SDK ABI version 5) carry IPv6
			// addresses, which this example does not announce.
			continue
		}
		a, err := netip.ParseAddr(p.IP)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("its peer address %q is not an IPv4 address", p.IP)
		}
		if p.ASN == 0 {
			return nil, fmt.Errorf("its peer %s has no ASN", p.IP)
		}
		// BIRD strings have no escapes: a quote or a line break would end
		// the string early. The message names the peer, never the password.
		if strings.ContainsAny(string(p.Password), "\"\n\r\x00") {
			return nil, fmt.Errorf("the BGP password of its peer %s contains a double quote, a line break or a NUL, which a BIRD configuration cannot hold; set a password without them", p.IP)
		}
		peers = append(peers, peer{addr: a, Peer: p})
	}
	sort.SliceStable(peers, func(i, j int) bool { return peers[i].addr.Less(peers[j].addr) })
	for i := 1; i < len(peers); i++ {
		if peers[i].addr == peers[i-1].addr {
			return nil, fmt.Errorf("it lists the peer %s twice", peers[i].addr)
		}
	}
	return peers, nil
}

// writeBFD writes the node's one BFD protocol, whose session options apply
// to direct neighbours (interface "*") and multihop ones (Equinix Metal's)
// alike; the BGP sessions ask it for a session with bfd on. BFD tells the
// routers within a fraction of a second that the node is gone, where the
// BGP hold time takes seconds, so they stop sending it traffic at once.
// Equinix's documentation says nothing about BFD (or the BGP timers) at its
// routers: if they do not answer, the session stays down and BGP carries
// on without it.
func writeBFD(b *strings.Builder, f bfd) {
	opts := fmt.Sprintf("min rx interval %d ms; min tx interval %d ms; multiplier %d;", f.intervalMs, f.intervalMs, f.multiplier)
	b.WriteString("\n# BFD, so the routers learn within a fraction of a second that this node\n# is gone.\n")
	fmt.Fprintf(b, "protocol bfd {\n\tinterface \"*\" { %s };\n\tmultihop { %s };\n}\n", opts, opts)
}

// writeBGP writes the BGP session of the node (source address src, local
// ASN asn) with p, with the timers and BFD the options ask for.
func writeBGP(b *strings.Builder, src netip.Addr, asn uint32, p peer, s settings) {
	fmt.Fprintf(b, "\nprotocol bgp %s {\n", protocolName(p.addr))
	fmt.Fprintf(b, "\tdescription \"Equinix Metal peer %s\";\n", p.addr)
	fmt.Fprintf(b, "\tlocal %s as %d;\n", src, asn)
	fmt.Fprintf(b, "\tneighbor %s as %d;\n", p.addr, p.ASN)
	// Equinix Metal's peers sit behind the node's private gateway, two
	// hops away, and its neighbour data says multihop of each (ABI
	// version 6): BIRD would otherwise take the peer for a directly
	// connected one, which it is not.
	if p.Multihop {
		b.WriteString("\tmultihop 2;\n")
	}
	if p.Password != "" {
		fmt.Fprintf(b, "\tpassword \"%s\";\n", string(p.Password))
	}
	if s.timers.hold != 0 {
		fmt.Fprintf(b, "\thold time %d;\n", s.timers.hold)
	}
	if s.timers.keepalive != 0 {
		fmt.Fprintf(b, "\tkeepalive time %d;\n", s.timers.keepalive)
	}
	if s.bfd.on() {
		b.WriteString("\tbfd on;\n")
	}
	fmt.Fprintf(b, "\tipv4 {\n\t\timport none;\n\t\texport filter %s;\n\t};\n}\n", exportFilter)
}

// protocolName is a BIRD symbol derived from the peer's address, so the
// session keeps its name (and BIRD keeps it up on reconfigure) when other
// peers come and go.
func protocolName(a netip.Addr) string {
	return "peer_" + strings.ReplaceAll(a.String(), ".", "_")
}

// isDNSLabel reports whether s is an RFC 1123 label, as namespace names are.
// It is written out rather than imported from k8s.io/apimachinery to keep
// the Wasm module small.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is an RFC 1123 subdomain, as most object
// names are.
func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isDNSLabel(l) {
			return false
		}
	}
	return true
}
