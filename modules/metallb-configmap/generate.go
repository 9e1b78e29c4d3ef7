package main

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/modules/internal/metallb"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Module is the MetalLB <= 0.12 built-in: the CCM's peers and pools merged
// into the user's MetalLB ConfigMap.
//
// IPv4 only: MetalLB <= 0.12's native BGP speaker announces IPv4 alone, so
// the module leaves out the IPv6 addresses of Services (a Service with no
// other address gets no pool) and the nodes' IPv6 peers, and says so in
// one warning. MetalLB >= 0.13 in FRR mode (metallb:///<ns>) announces
// them.
var Module = sdk.Module{Name: "metallb-configmap", Version: "1.0.0", Describe: describe, Generate: generate}

const (
	defaultConfigMap = "config"
	configKey        = "config"
	// nomatchPrefix marks the CCM's own peers, as upstream does: a node
	// selector on labels no node carries is ignored by MetalLB (selectors
	// are ORed) but tells the CCM which peers it wrote.
	//
	// Upstream writes one such selector per Service the peer serves. MetalLB
	// <= 0.12 closes a peer's session and opens a new one whenever
	// anything in the peer changes (its SetConfig compares peers with
	// reflect.DeepEqual), so upstream's form resets every BGP session on
	// every Service created or deleted. The CCM writes one selector that
	// never changes instead: ownMarker, in upstream's service-name label,
	// which upstream v3.8.1 ignores when it matches peers
	// (EqualIgnoreService), so after a rollback it finds these peers and
	// adds its selectors to them rather than a second copy of each.
	nomatchPrefix = "nomatch.metal.equinix.com/"
	svcNameKey    = nomatchPrefix + "service-name"
	ownMarker     = "cloud-provider-equinix-metal"
)

func target(o sdk.Options) (ns, name string) {
	name = o.ConfigMap
	if name == "" {
		name = defaultConfigMap
	}
	return metallb.Namespace(o), name
}

func describe(o sdk.Options) (sdk.Description, error) {
	ns, name := target(o)
	return sdk.Description{
		Emits: []sdk.ObjectKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns}},
		Reads: []sdk.ObjectRead{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}},
	}, nil
}

// generate merges into the existing ConfigMap: the user's peers, pools and
// other settings stay as they are (in their order), the CCM's are replaced
// by the current ones and appended. If the ConfigMap does not exist it emits
// nothing, as upstream leaves it absent: the administrator creates it (MetalLB
// <= 0.12's manifest has none; an empty one is enough, the CCM fills it).
func generate(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	ns, name := target(req.Options)
	timers, err := metallb.TimersFrom(req.Options)
	if err != nil {
		return sdk.GenerateResponse{}, err
	}
	cm := existingConfigMap(req.Existing, ns, name)
	services, v6 := metallb.WithoutIPv6(req.Services)
	pools, warnings := metallb.Pools(services)
	resp := sdk.GenerateResponse{Warnings: append(warnings, legacyKeyWarnings(pools, services)...)}
	resp.Warnings = append(resp.Warnings, limitWarnings(req, pools, v6, ns)...)
	if timers.Keepalive != 0 {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("%s is not written: MetalLB 0.12's ConfigMap has hold-time only (its speaker sends a keepalive every third of it)", metallb.KeepaliveTimeParam))
	}
	if req.Options.Params[metallb.BFDIntervalParam] != "" {
		// MetalLB 0.12 runs BFD only in its experimental FRR mode, which
		// this module does not write for.
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("BFD (%s) is not written: MetalLB 0.12's native speaker runs no BFD; use MetalLB >= 0.13 in FRR mode or with FRR-K8s (metallb:///%s?%s=frr-k8s)", metallb.BFDIntervalParam, ns, metallb.BGPTypeParam))
	}
	if cm == nil {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("the MetalLB ConfigMap %s/%s does not exist, so MetalLB gets no peers or pools; create it (an empty one will do: kubectl create configmap %s -n %s; MetalLB <= 0.12's manifest has none), or use metallb:///%s for MetalLB >= 0.13", ns, name, name, ns, ns))
		return resp, nil
	}
	cfg, err := parseConfig(cm, ns, name)
	if err != nil {
		return resp, err
	}

	userPeers := keep(cfg["peers"], func(m map[string]any) bool { return !ownPeer(m) })
	userPools := keep(cfg["address-pools"], func(m map[string]any) bool { return !ownPool(m) })
	var peers []any
	if len(pools) > 0 {
		peers = ownPeerEntries(req.Nodes, timers)
	}
	setList(cfg, "peers", append(userPeers, peers...))
	setList(cfg, "address-pools", append(userPools, ownPoolEntries(pools)...))

	out, err := yaml.Marshal(cfg)
	if err != nil {
		return resp, err
	}
	// Only data.config is emitted: the host applies it with server-side
	// apply, so the ConfigMap's other keys and metadata stay the user's.
	resp.Objects = []sdk.Object{{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string]any{configKey: string(out)},
	}}
	return resp, nil
}

// existingConfigMap is the ConfigMap ns/name among what the host read for
// the module (describe asks for it alone), nil if it does not exist.
func existingConfigMap(existing []sdk.Object, ns, name string) sdk.Object {
	var cm sdk.Object
	for _, o := range existing {
		if o.Kind() == "ConfigMap" && o.Namespace() == ns && o.Name() == name {
			cm = o
		}
	}
	return cm
}

// limitWarnings says what MetalLB <= 0.12 cannot do of what the request
// asks: announce the IPv6 addresses of the Services v6 names, and
// announce a pool from its metro's nodes alone.
func limitWarnings(req sdk.GenerateRequest, pools []metallb.Pool, v6 []string, ns string) []string {
	var out []string
	if len(v6) > 0 {
		out = append(out, fmt.Sprintf("the IPv6 addresses of %d Services (%s, for one) are left out of the MetalLB ConfigMap: MetalLB <= 0.12's BGP speaker announces IPv4 only; use MetalLB >= 0.13 in FRR mode (metallb:///%s) to announce them", len(v6), v6[0], ns))
	}
	// MetalLB <= 0.12 restricts peers to nodes, not pools: every BGP node
	// announces every pool, also outside the metro Equinix routes it in.
	if n, pool, node := metallb.Outside(pools, req.Nodes); n > 0 {
		out = append(out, fmt.Sprintf("the Elastic IPs of %d address pools are announced from BGP nodes outside their metro (%s from %s, for one), which Equinix does not route: MetalLB <= 0.12 cannot restrict an address pool to some nodes; select BGP nodes of one metro (bgpNodeSelector), or use MetalLB >= 0.13 (metallb:///%s), whose advertisements this CCM restricts to each address's metro", n, pool, node, ns))
	}
	return out
}

// parseConfig is the MetalLB configuration in the ConfigMap's config key:
// an empty map when the key is empty, absent or null, so that the CCM's
// entries are merged into something.
func parseConfig(cm sdk.Object, ns, name string) (map[string]any, error) {
	data, _ := cm["data"].(map[string]any)
	raw, _ := data[configKey].(string)
	cfg := map[string]any{}
	if strings.TrimSpace(raw) != "" {
		if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
			return nil, fmt.Errorf("the %q key of ConfigMap %s/%s is not valid YAML (%v); fix it or empty it, the CCM merges its entries into it", configKey, ns, name, err)
		}
		if cfg == nil {
			cfg = map[string]any{}
		}
	}
	return cfg, nil
}

// ownPeerEntries is the CCM's peers: one per BGP session of the nodes,
// restricted to the session's node by its hostname, and marked as the
// CCM's by the ownMarker selector that never changes (see nomatchPrefix).
func ownPeerEntries(nodes []sdk.Node, timers metallb.Timers) []any {
	var peers []any
	for _, sess := range metallb.Sessions(nodes) {
		sels := []any{
			map[string]any{"match-labels": map[string]any{metallb.HostnameLabel: sess.Hostname}},
			map[string]any{"match-labels": map[string]any{svcNameKey: ownMarker}},
		}
		// No peer-port: MetalLB's default is 179, and upstream compares
		// the port when it looks for its own peer after a rollback.
		p := map[string]any{
			"my-asn":         sess.LocalASN,
			"peer-asn":       sess.Peer.ASN,
			"peer-address":   sess.Peer.IP,
			"node-selectors": sels,
		}
		if sess.SourceIP != "" {
			p["source-address"] = sess.SourceIP
		}
		if sess.EBGPMultiHop() {
			// MetalLB 0.12's ConfigMap has the key (its FRR mode reads
			// it; the native speaker dials at the system's TTL and
			// ignores it).
			p["ebgp-multihop"] = true
		}
		if sess.Peer.Password != "" {
			p["password"] = string(sess.Peer.Password)
		}
		if timers.Hold != 0 {
			// MetalLB 0.12's ConfigMap has hold-time and no keepalive:
			// its speaker sends one every third of the hold time.
			p["hold-time"] = metallb.Duration(timers.Hold)
		}
		peers = append(peers, p)
	}
	return peers
}

// ownPoolEntries is the CCM's address pools, named as upstream names them
// (ownPool tells them apart by that name) and never assigned to a Service
// that does not ask for its address.
func ownPoolEntries(pools []metallb.Pool) []any {
	var own []any
	for _, p := range pools {
		addrs := make([]any, len(p.CIDRs))
		for i, c := range p.CIDRs {
			addrs[i] = c
		}
		own = append(own, map[string]any{
			"name":        strings.Join(p.Services, ","),
			"protocol":    "bgp",
			"addresses":   addrs,
			"auto-assign": false,
		})
	}
	return own
}

func keep(v any, pred func(map[string]any) bool) []any {
	list, _ := v.([]any)
	var out []any
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok || pred(m) {
			out = append(out, e)
		}
	}
	return out
}

func setList(cfg map[string]any, key string, list []any) {
	if len(list) == 0 {
		delete(cfg, key)
		return
	}
	cfg[key] = list
}

// ownPeer: a peer with a node selector on a nomatch.metal.equinix.com/ label
// was written by a CCM (this one, or upstream's service bookkeeping).
func ownPeer(m map[string]any) bool {
	sels, _ := m["node-selectors"].([]any)
	for _, s := range sels {
		sm, _ := s.(map[string]any)
		labels, _ := sm["match-labels"].(map[string]any)
		for k := range labels {
			if strings.HasPrefix(k, nomatchPrefix) {
				return true
			}
		}
	}
	return false
}

// ownPool: the CCM names its pools "<namespace>/<service>", comma-joined when
// Services share one, as upstream does; a user's pool name has no slash.
func ownPool(m map[string]any) bool {
	name, _ := m["name"].(string)
	if name == "" {
		return false
	}
	parts := strings.Split(name, ",")
	sort.Strings(parts)
	for _, p := range parts {
		ns, svc, ok := strings.Cut(p, "/")
		if !ok || ns == "" || svc == "" || strings.Contains(svc, "/") {
			return false
		}
	}
	return true
}

// legacyAnnotation is the only sharing-key annotation MetalLB <= 0.12 reads.
const legacyAnnotation = "metallb.universe.tf/allow-shared-ip"

// legacyKeyWarnings: the CCM shares an Elastic IP between the Services of a
// key in either annotation form, but MetalLB <= 0.12 reads only the older
// one, so a shared pool whose Services carry the key only as
// metallb.io/allow-shared-ip is served for one of them alone.
func legacyKeyWarnings(pools []metallb.Pool, services []sdk.Service) []string {
	byID := map[string]sdk.Service{}
	for _, s := range services {
		byID[s.Namespace+"/"+s.Name] = s
	}
	var out []string
	for _, p := range pools {
		if !p.Shared() || p.SharingKey == "" {
			continue
		}
		var missing []string
		for _, id := range p.Services {
			if byID[id].Annotations[legacyAnnotation] != p.SharingKey {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("Services %s share %s with the key %q in metallb.io/allow-shared-ip only, which MetalLB <= 0.12 does not read, so it serves one of them; add %s: %q to them", strings.Join(missing, ", "), strings.Join(p.CIDRs, ","), p.SharingKey, legacyAnnotation, p.SharingKey))
		}
	}
	return out
}
