package main

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/metal-ccm/cloud-provider-equinix-metal/modules/internal/metallb"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Module is the MetalLB >= 0.13 built-in: custom resources in the MetalLB
// namespace.
var Module = sdk.Module{Name: "metallb-crd", Version: "1.0.0", Describe: describe, Generate: generate}

const (
	poolAPI    = "metallb.io/v1beta1"
	peerAPI    = "metallb.io/v1beta2" // the version MetalLB 0.16 stores
	advAPI     = "metallb.io/v1beta1"
	bfdAPI     = "metallb.io/v1beta1"
	advName    = "equinix-metal-bgp-adv"
	secretName = "equinix-metal-bgp-password"
	cpLabel    = "cloud-provider"
	cpValue    = "equinix-metal"
	servicesAn = "metal.equinix.com/services"
	bgpPort    = 179
	// Upstream v3.8.1 recognises a pool as a Service's by the label
	// service-<name>: namespace-<namespace>; without it, upstream started
	// after this CCM rewrites the pool's addresses to [<ip>/32, ""].
	svcLabelPrefix = "service-"
	nsValuePrefix  = "namespace-"
	maxLabelName   = 63
	// A pool selector no pool matches: the default advertisement's when
	// every pool is announced by a per-metro one.
	noPoolLabel = "lb.metal.equinix.com/no-pool"
	noPoolValue = "none"
	// Upstream v3.8.1 gave every BGPPeer, after its hostname selector, one
	// selector per Service whose labels are all under nomatchPrefix (no
	// node carries them). keptLabel marks a peer taken over from upstream
	// whose selectors this module keeps as they were (keptSelectors).
	nomatchPrefix = "nomatch.metal.equinix.com/"
	keptLabel     = "lb.metal.equinix.com/upstream-selectors"
	keptValue     = "kept"
)

func describe(o sdk.Options) (sdk.Description, error) {
	ns := metallb.Namespace(o)
	return sdk.Description{
		Emits: []sdk.ObjectKind{
			{APIVersion: poolAPI, Kind: "IPAddressPool", Namespace: ns},
			{APIVersion: peerAPI, Kind: "BGPPeer", Namespace: ns},
			{APIVersion: advAPI, Kind: "BGPAdvertisement", Namespace: ns},
			// The BFD settings the peers name (bfdProfile), when BFD is on.
			{APIVersion: bfdAPI, Kind: "BFDProfile", Namespace: ns},
			// The BGP password, referenced by the peers (passwordSecret).
			{APIVersion: "v1", Kind: "Secret", Namespace: ns},
		},
		// The user's own advertisement, which suppresses the default one.
		Reads: []sdk.ObjectRead{
			{APIVersion: advAPI, Kind: "BGPAdvertisement", Namespace: ns, LabelSelector: cpLabel + "=" + cpValue},
			// The peers whose selectors are kept (keptSelectors):
			// upstream's not yet taken over, and those taken over. Both
			// are none in a cluster that never ran upstream, so the read
			// costs nothing at scale there.
			{APIVersion: peerAPI, Kind: "BGPPeer", Namespace: ns, LabelSelector: cpLabel + "=" + cpValue + ",!" + sdk.OwnedLabel},
			{APIVersion: peerAPI, Kind: "BGPPeer", Namespace: ns, LabelSelector: keptLabel + "=" + keptValue},
		},
	}, nil
}

// generate follows upstream: a pool per Service (autoAssign false), a peer
// per node and peer restricted to the node (its password in a Secret, see
// passwordSecrets), and the default advertisement
// unless the user has labelled one of their own. With no Service there is
// nothing to announce, so it emits nothing (upstream deletes the peers and
// the advertisement when the last Service goes).
//
// IPv6 (ABI version 5): a Service's IPv6 address is in its pool as
// <address>/128, next to its IPv4 one for a dual-stack Service (MetalLB
// gives a dual-stack Service one address of each family from one pool);
// each node's IPv6 peers get BGPPeers of their own (peer). The
// advertisements need nothing more: they set no aggregation length, so
// MetalLB's defaults, aggregationLength 32 and aggregationLengthV6 128,
// announce each address alone. An IPv4-only cluster's output is what it
// was before IPv6.
//
// Only MetalLB in an FRR mode announces IPv6 (metallb.AnnouncesIPv6, from
// the bgpType parameter). In native mode, the default, MetalLB refuses its
// whole configuration once an announced pool holds IPv6, so the IPv6
// addresses and peers are left out, with a warning: IPv4 keeps working.
// (The CCM reserves no IPv6 Elastic IP for such a cluster; this covers an
// address it was given anyway.)
func generate(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	ns := metallb.Namespace(req.Options)
	services, nodesV6 := req.Services, req.Nodes
	var warnings []string
	if !metallb.AnnouncesIPv6(req.Options) {
		var v6 []string
		if services, v6 = metallb.WithoutIPv6(req.Services); len(v6) > 0 {
			warnings = append(warnings, fmt.Sprintf("the IPv6 addresses of %d Services (%s, for one) are left out of MetalLB's pools: MetalLB in native BGP mode announces IPv4 only and refuses a configuration whose announced pools hold IPv6; run MetalLB in FRR mode (v0.16.1 or later) and set the loadbalancer to metallb:///%s?%s=frr", len(v6), v6[0], ns, metallb.BGPTypeParam))
		}
		nodesV6 = nil
	}
	ps, settingWarnings, err := sessionSettings(req.Options, ns)
	if err != nil {
		return sdk.GenerateResponse{}, err
	}
	ps.kept = existingSelectors(req.Existing, ns)
	warnings = append(warnings, settingWarnings...)
	pools, poolWarnings := metallb.Pools(services)
	resp := sdk.GenerateResponse{Warnings: append(warnings, poolWarnings...)}
	if len(pools) == 0 {
		return resp, nil
	}
	var poolNames []string // announced from every BGP node
	byPlace := map[place][]string{}
	fallback := map[place]string{} // a facility's metro (metallb.Pool.MetroFallback)
	for _, p := range pools {
		name := poolName(p)
		if key, value, ok := p.NodeSelector(); ok {
			pl := place{key, value}
			m, seen := fallback[pl]
			if !seen || m == p.MetroFallback() {
				fallback[pl] = p.MetroFallback()
			} else {
				fallback[pl] = "" // pools of one facility naming different metros: none
			}
			byPlace[pl] = append(byPlace[pl], name)
		} else {
			if p.Located() {
				resp.Warnings = append(resp.Warnings, fmt.Sprintf("pool %s: the location %q of its Elastic IP is no label value; it is announced from every BGP node", name, p.Location.Metro+p.Location.Facility))
			}
			poolNames = append(poolNames, name)
		}
		resp.Objects = append(resp.Objects, sdk.Object{
			"apiVersion": poolAPI, "kind": "IPAddressPool",
			"metadata": poolMeta(name, ns, p),
			"spec":     sdk.Fields{{Name: "addresses", Value: p.CIDRs}, {Name: "autoAssign", Value: false}},
		})
	}
	if ps.bfd.On() {
		// Before the peers that name it: MetalLB takes a peer naming a
		// profile not yet there for a passing error, and retries.
		resp.Objects = append(resp.Objects, bfdProfile(ns, ps.bfd))
	}
	secrets := passwordSecrets{}
	// The IPv6 peers after the IPv4 ones, so that the IPv4 peers'
	// password Secrets keep their names (numbered in order of first use).
	for _, s := range append(metallb.Sessions(req.Nodes), metallb.SessionsV6(nodesV6)...) {
		resp.Objects = append(resp.Objects, peer(s, ns, ps, &secrets))
	}
	resp.Objects = append(resp.Objects, secrets.objects(ns)...)
	if !userAdvertisement(req.Existing, ns) || upstreamAdvertisement(req.Existing, ns) {
		resp.Objects = append(resp.Objects, advertisements(ns, poolNames, byPlace, fallback)...)
	}
	return resp, nil
}

// peerSettings is what every BGPPeer is written with besides its session.
type peerSettings struct {
	timers metallb.Timers
	bfd    metallb.BFD
	// multihop: the speaker is FRR-based, so ebgpMultiHop is written
	// where the session is multihop (see peer).
	multihop bool
	// kept are the node selectors of existing peers by name
	// (existingSelectors), for keptSelectors.
	kept map[string][]any
}

// sessionSettings are the BGP timers and BFD the options ask for, less
// what MetalLB's native speaker would refuse (each left out with a
// warning).
func sessionSettings(o sdk.Options, ns string) (ps peerSettings, warnings []string, err error) {
	ps.multihop = metallb.FRRMode(o)
	timers, err := metallb.TimersFrom(o)
	if err != nil {
		return ps, nil, err
	}
	if timers.Keepalive != 0 && !metallb.FRRMode(o) {
		// MetalLB's native speaker refuses a BGPPeer with keepaliveTime,
		// and with it its whole configuration: no Service created after
		// would be announced. It keeps alive at a third of the hold time.
		warnings = append(warnings, fmt.Sprintf("%s is not written: MetalLB's native BGP speaker refuses a BGPPeer that sets it (and with it its whole configuration) and sends a keepalive every third of the hold time; if MetalLB runs in FRR mode, say so: metallb:///%s?%s=frr (or frr-k8s)", metallb.KeepaliveTimeParam, ns, metallb.BGPTypeParam))
		timers.Keepalive = 0
	}
	bfd, err := metallb.BFDFrom(o)
	if err != nil {
		return ps, nil, err
	}
	if bfd.On() && !metallb.FRRMode(o) {
		// MetalLB's native speaker runs no BFD, and MetalLB refuses a
		// native configuration whose peers name a BFD profile.
		warnings = append(warnings, fmt.Sprintf("BFD (%s) is not written: MetalLB's native BGP speaker runs no BFD; it needs MetalLB in FRR mode or with FRR-K8s, and then say so: metallb:///%s?%s=frr (or frr-k8s)", metallb.BFDIntervalParam, ns, metallb.BGPTypeParam))
		bfd = metallb.BFD{}
	}
	ps.timers, ps.bfd = timers, bfd
	return ps, warnings, nil
}

// peer is the BGPPeer of one session, restricted to its node. An IPv6
// session (Equinix's fc00::e and fc00::f, from the node's public IPv6) is
// a BGPPeer of its own, named PeerNameV6 so that no IPv4 peer is renamed,
// with an IPv6 peerAddress and sourceAddress: MetalLB's FRR takes the
// session's family from the peer address and, without
// dualStackAddressFamily, announces only that family's addresses on it,
// as Equinix's separate IPv4 and IPv6 sessions want.
//
// A change to any field of a BGPPeer, even one the speaker does not use,
// makes MetalLB's native speaker close the session and open it again
// (it compares whole peer configurations), and the routers withdraw the
// node's routes meanwhile: connections hashed to it are reset. So a peer
// carries nothing its speaker does not need (ebgpMultiHop only for FRR),
// and a peer taken over from upstream keeps upstream's selectors.
func peer(s metallb.Session, ns string, ps peerSettings, secrets *passwordSecrets) sdk.Object {
	name := metallb.PeerName(s.Node, s.Index)
	if s.IPv6 {
		name = metallb.PeerNameV6(s.Node, s.Index)
	}
	// Members in sorted order, as the encoder then writes them as they
	// are.
	spec := make(sdk.Fields, 0, 10)
	if ps.bfd.On() {
		spec = append(spec, sdk.Field{Name: "bfdProfile", Value: metallb.BFDProfileName})
	}
	if ps.multihop && s.EBGPMultiHop() {
		// Equinix's peers are routers' loopbacks behind the node's
		// gateway: FRR (MetalLB's FRR and FRR-K8s modes) keeps an eBGP
		// session at TTL 1 and checks the peer is connected unless told
		// so, and such a session never comes up. The native speaker
		// dials at the system's TTL and never reads the field: written
		// there, it would only restart the sessions of peers taken over
		// from upstream, which had none.
		spec = append(spec, sdk.Field{Name: "ebgpMultiHop", Value: true})
	}
	// The timers the user chose: the hold time is how long the routers
	// keep sending a dead node traffic (MetalLB's default is 90 s).
	if ps.timers.Hold != 0 {
		spec = append(spec, sdk.Field{Name: "holdTime", Value: metallb.Duration(ps.timers.Hold)})
	}
	if ps.timers.Keepalive != 0 {
		spec = append(spec, sdk.Field{Name: "keepaliveTime", Value: metallb.Duration(ps.timers.Keepalive)})
	}
	metadata := meta(name, ns)
	var selectors any = []any{hostnameSelector(s.Hostname)}
	if kept, ok := keptSelectors(ps.kept[name], s.Hostname); ok {
		selectors = kept
		metadata = meta(name, ns, sdk.Field{Name: keptLabel, Value: keptValue})
	}
	spec = append(spec,
		sdk.Field{Name: "myASN", Value: s.LocalASN},
		sdk.Field{Name: "nodeSelectors", Value: selectors})
	if ref := secrets.ref(string(s.Peer.Password), ns); ref != nil {
		spec = append(spec, sdk.Field{Name: "passwordSecret", Value: ref})
	}
	spec = append(spec,
		sdk.Field{Name: "peerASN", Value: s.Peer.ASN},
		sdk.Field{Name: "peerAddress", Value: s.Peer.IP},
		sdk.Field{Name: "peerPort", Value: bgpPort})
	if s.SourceIP != "" {
		spec = append(spec, sdk.Field{Name: "sourceAddress", Value: s.SourceIP})
	}
	return sdk.Object{
		"apiVersion": peerAPI, "kind": "BGPPeer",
		"metadata": metadata,
		"spec":     spec,
	}
}

// hostnameSelector restricts a peer to the node of that hostname.
func hostnameSelector(hostname string) sdk.Fields {
	return sdk.Fields{{Name: "matchLabels", Value: sdk.Fields{{Name: metallb.HostnameLabel, Value: hostname}}}}
}

// existingSelectors are the node selectors of the existing BGPPeers in ns
// (those the module reads: upstream's and those whose selectors it kept),
// by name.
func existingSelectors(existing []sdk.Object, ns string) map[string][]any {
	var out map[string][]any
	for _, o := range existing {
		if o.Kind() != "BGPPeer" || o.Namespace() != ns {
			continue
		}
		spec, _ := o["spec"].(map[string]any)
		sels, ok := spec["nodeSelectors"].([]any)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string][]any{}
		}
		out[o.Name()] = sels
	}
	return out
}

// keptSelectors reports whether a peer's existing selectors are
// upstream's for the node of that hostname (its hostname selector and
// never-matching ones under nomatchPrefix, one per Service upstream
// served), and returns them as they are, order included: they select the
// same node as the hostname selector alone, and keeping them spares the
// session the restart a change would cost (see peer). They stay until the
// peer goes (its node leaves); a user who removes them by hand (one
// restart of that session) gets the hostname selector alone from then on.
func keptSelectors(existing []any, hostname string) ([]any, bool) {
	if len(existing) < 2 {
		return nil, false
	}
	hostnames := 0
	for _, sel := range existing {
		m, ok := sel.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, false
		}
		labels, ok := m["matchLabels"].(map[string]any)
		if !ok || len(labels) == 0 {
			return nil, false
		}
		if len(labels) == 1 && labels[metallb.HostnameLabel] == hostname {
			hostnames++
			continue
		}
		for k := range labels {
			if !strings.HasPrefix(k, nomatchPrefix) {
				return nil, false
			}
		}
	}
	return existing, hostnames == 1
}

// bfdProfile is the one BFDProfile every peer names when BFD is on: both
// intervals the user's, and any TTL taken (metallb.BFDMinimumTTL), since
// Equinix's peers are multihop and FRR's default check would drop what
// the routers send from further than one hop.
func bfdProfile(ns string, b metallb.BFD) sdk.Object {
	return sdk.Object{
		"apiVersion": bfdAPI, "kind": "BFDProfile",
		"metadata": meta(metallb.BFDProfileName, ns),
		"spec": sdk.Fields{
			{Name: "detectMultiplier", Value: b.Multiplier},
			{Name: "minimumTtl", Value: metallb.BFDMinimumTTL},
			{Name: "receiveInterval", Value: b.IntervalMs},
			{Name: "transmitInterval", Value: b.IntervalMs},
		},
	}
}

// place is a node label and value: where a pool's Elastic IP is routed.
type place struct{ key, value string }

// advertisements are the default advertisement, of the pools announced from
// every BGP node, and one advertisement per metro (or facility) of the
// pools whose Elastic IPs are reserved there, restricted with nodeSelectors
// to the nodes labelled with it: Equinix routes an Elastic IP in its metro
// alone, and refuses it from anywhere else.
//
// MetalLB announces a pool from a node if any advertisement of the pool
// selects the node, so a located pool is in its place's advertisement
// only, never in the default one. The default one keeps upstream's name,
// label and form (a list of pool names), so upstream v3.8.1 still finds it
// after a rollback and appends its Services' pools; the per-place ones
// carry no cloud-provider label, so neither upstream nor userAdvertisement
// takes them for a user's own. A facility's advertisement also selects the
// nodes of its metro that have no facility label (upstream v3.8.1 left it
// unset), so a take-over never leaves its pools announced by no node. An
// advertisement that lists no pool and has no pool selector announces
// every pool, so a default advertisement left with no pool lists none and
// selects none (noPool).
func advertisements(ns string, poolNames []string, byPlace map[place][]string, fallback map[place]string) []sdk.Object {
	// The list is written even empty: applied, it takes the field over
	// from upstream's field manager (an adopted equinix-metal-bgp-adv),
	// which an omitted field would leave listing every pool.
	if poolNames == nil {
		poolNames = []string{}
	}
	spec := sdk.Fields{{Name: "ipAddressPools", Value: poolNames}}
	if len(poolNames) == 0 {
		spec = append(spec, sdk.Field{Name: "ipAddressPoolSelectors", Value: []any{sdk.Fields{{Name: "matchLabels", Value: sdk.Fields{{Name: noPoolLabel, Value: noPoolValue}}}}}})
	}
	out := []sdk.Object{{
		"apiVersion": advAPI, "kind": "BGPAdvertisement",
		"metadata": meta(advName, ns),
		"spec":     spec,
	}}
	places := make([]place, 0, len(byPlace))
	for p := range byPlace {
		places = append(places, p)
	}
	slices.SortFunc(places, func(a, b place) int { return strings.Compare(a.key+"="+a.value, b.key+"="+b.value) })
	for _, p := range places {
		kind := "metro"
		if p.key == sdk.FacilityLabel {
			kind = "facility"
		}
		// Any of nodeSelectors selects a node (MetalLB ORs them).
		selectors := []any{sdk.Fields{{Name: "matchLabels", Value: sdk.Fields{{Name: p.key, Value: p.value}}}}}
		if m := fallback[p]; m != "" {
			selectors = append(selectors, sdk.Fields{
				{Name: "matchExpressions", Value: []any{sdk.Fields{{Name: "key", Value: sdk.FacilityLabel}, {Name: "operator", Value: "DoesNotExist"}}}},
				{Name: "matchLabels", Value: sdk.Fields{{Name: sdk.MetroLabel, Value: m}}},
			})
		}
		out = append(out, sdk.Object{
			"apiVersion": advAPI, "kind": "BGPAdvertisement",
			"metadata": sdk.Fields{{Name: "name", Value: metallb.ObjectName("-", advName, kind, p.value)}, {Name: "namespace", Value: ns}},
			"spec": sdk.Fields{
				{Name: "ipAddressPools", Value: byPlace[p]},
				{Name: "nodeSelectors", Value: selectors},
			},
		})
	}
	return out
}

// poolName is "<namespace>.<service>" for one Service: the dot cannot occur
// in either part, so, unlike upstream's stripped "<ns><svc>", two Services
// never collide. A shared pool is named after its first address, which
// stays put while Services join and leave it; so is the pool of a sharing
// key's Elastic IP even while one Service is left with it, so that the pool
// is never renamed (a rename is a new pool with the same address next to
// the old one until the prune, which MetalLB's webhook refuses).
func poolName(p metallb.Pool) string {
	if !p.Shared() && p.SharingKey == "" {
		ns, name, _ := strings.Cut(p.Services[0], "/")
		return metallb.ObjectName(".", ns, name)
	}
	ip, _, _ := strings.Cut(p.CIDRs[0], "/")
	return metallb.ObjectName(".", "shared", strings.ReplaceAll(ip, ":", "-"))
}

// userAdvertisement reports whether a BGPAdvertisement labelled
// cloud-provider=equinix-metal exists that the CCM did not create. The one
// named equinix-metal-bgp-adv is never the user's: upstream created it under
// that name, with that label and without the owned-by label.
func userAdvertisement(existing []sdk.Object, ns string) bool {
	for _, o := range existing {
		if o.Kind() != "BGPAdvertisement" || o.Namespace() != ns || o.Name() == advName {
			continue
		}
		l := o.Labels()
		if l[cpLabel] == cpValue && l[sdk.OwnedLabel] == "" {
			return true
		}
	}
	return false
}

// upstreamAdvertisement reports whether upstream's default advertisement
// (equinix-metal-bgp-adv, not yet owned) exists. It is adopted even next
// to a user's own, as upstream kept updating it; once owned, the user's
// advertisement suppresses it like any default of this CCM.
func upstreamAdvertisement(existing []sdk.Object, ns string) bool {
	for _, o := range existing {
		if o.Kind() == "BGPAdvertisement" && o.Namespace() == ns && o.Name() == advName && o.Labels()[sdk.OwnedLabel] == "" {
			return true
		}
	}
	return false
}

// poolMeta labels a pool as upstream does (cloud-provider plus one
// service-<name>: namespace-<namespace> per Service), so upstream v3.8.1
// reads the pool as its own after a rollback. A Service whose name or
// namespace would make the label longer than 63 characters gets none:
// upstream could not have created that label either.
func poolMeta(name, ns string, p metallb.Pool) sdk.Fields {
	labels := make(sdk.Fields, 0, 1+len(p.Services))
	labels = append(labels, sdk.Field{Name: cpLabel, Value: cpValue})
	for _, s := range p.Services {
		svcNS, svcName, _ := strings.Cut(s, "/")
		key, value := svcLabelPrefix+svcName, nsValuePrefix+svcNS
		if len(key) > maxLabelName || len(value) > maxLabelName {
			continue
		}
		// Two Services of one name in two namespaces share a pool: as
		// in a map, the later one's label is the one kept.
		if i := slices.IndexFunc(labels, func(f sdk.Field) bool { return f.Name == key }); i >= 0 {
			labels[i].Value = value
			continue
		}
		labels = append(labels, sdk.Field{Name: key, Value: value})
	}
	return sdk.Fields{
		{Name: "annotations", Value: sdk.Fields{{Name: servicesAn, Value: strings.Join(p.Services, ",")}}},
		{Name: "labels", Value: labels},
		{Name: "name", Value: name},
		{Name: "namespace", Value: ns},
	}
}

// passwordSecrets gives each distinct BGP password a Secret of type
// kubernetes.io/basic-auth, which is what MetalLB's passwordSecret requires
// (in its own namespace, the password under the key "password"). The peers
// reference it instead of carrying the password in spec.password: a BGPPeer
// is readable by far more people and tools than a Secret, and its body
// would be in every log of every client that lists peers. Equinix gives a
// project one password, so there is normally one Secret; should neighbours
// report different ones, the others are numbered in order of first use.
type passwordSecrets struct {
	names     map[string]string
	passwords []string
}

func (p *passwordSecrets) ref(password, ns string) sdk.Fields {
	if password == "" {
		return nil
	}
	name, ok := p.names[password]
	if !ok {
		name = secretName
		if n := len(p.passwords); n > 0 {
			name += "-" + strconv.Itoa(n+1)
		}
		if p.names == nil {
			p.names = map[string]string{}
		}
		p.names[password] = name
		p.passwords = append(p.passwords, password)
	}
	return sdk.Fields{{Name: "name", Value: name}, {Name: "namespace", Value: ns}}
}

func (p *passwordSecrets) objects(ns string) []sdk.Object {
	var out []sdk.Object
	for _, pw := range p.passwords {
		out = append(out, sdk.Object{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": meta(p.names[pw], ns),
			"type":     "kubernetes.io/basic-auth",
			"data":     map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(pw))},
		})
	}
	return out
}

// meta is the metadata of a peer, the advertisement or a Secret: the
// cloud-provider label, then labels (whose names sort after it, as the
// encoder writes members in their order).
func meta(name, ns string, labels ...sdk.Field) sdk.Fields {
	return sdk.Fields{
		{Name: "labels", Value: append(sdk.Fields{{Name: cpLabel, Value: cpValue}}, labels...)},
		{Name: "name", Value: name},
		{Name: "namespace", Value: ns},
	}
}
