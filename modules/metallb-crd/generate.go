package main

import (
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
	advName    = "equinix-metal-bgp-adv"
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
)

func describe(o sdk.Options) (sdk.Description, error) {
	ns := metallb.Namespace(o)
	return sdk.Description{
		Emits: []sdk.ObjectKind{
			{APIVersion: poolAPI, Kind: "IPAddressPool", Namespace: ns},
			{APIVersion: peerAPI, Kind: "BGPPeer", Namespace: ns},
			{APIVersion: advAPI, Kind: "BGPAdvertisement", Namespace: ns},
		},
		// The user's own advertisement, which suppresses the default one.
		Reads: []sdk.ObjectRead{{APIVersion: advAPI, Kind: "BGPAdvertisement", Namespace: ns, LabelSelector: cpLabel + "=" + cpValue}},
	}, nil
}

// generate follows upstream: a pool per Service (autoAssign false), a peer
// per node and peer restricted to the node, and the default advertisement
// unless the user has labelled one of their own. With no Service there is
// nothing to announce, so it emits nothing (upstream deletes the peers and
// the advertisement when the last Service goes).
func generate(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	ns := metallb.Namespace(req.Options)
	pools, warnings := metallb.Pools(req.Services)
	resp := sdk.GenerateResponse{Warnings: warnings}
	if len(pools) == 0 {
		return resp, nil
	}
	var poolNames []string
	for _, p := range pools {
		name := poolName(p)
		poolNames = append(poolNames, name)
		resp.Objects = append(resp.Objects, sdk.Object{
			"apiVersion": poolAPI, "kind": "IPAddressPool",
			"metadata": poolMeta(name, ns, p),
			"spec":     poolSpec{Addresses: p.CIDRs, AutoAssign: false},
		})
	}
	for _, s := range metallb.Sessions(req.Nodes) {
		spec := peerSpec{
			MyASN:         s.LocalASN,
			NodeSelectors: []selector{{MatchLabels: map[string]string{metallb.HostnameLabel: s.Hostname}}},
			Password:      string(s.Peer.Password),
			PeerASN:       s.Peer.ASN,
			PeerAddress:   s.Peer.IP,
			PeerPort:      bgpPort,
			SourceAddress: s.SourceIP,
		}
		resp.Objects = append(resp.Objects, sdk.Object{
			"apiVersion": peerAPI, "kind": "BGPPeer",
			"metadata": meta(metallb.PeerName(s.Node, s.Index), ns, nil),
			"spec":     spec,
		})
	}
	if !userAdvertisement(req.Existing, ns) || upstreamAdvertisement(req.Existing, ns) {
		resp.Objects = append(resp.Objects, sdk.Object{
			"apiVersion": advAPI, "kind": "BGPAdvertisement",
			"metadata": meta(advName, ns, nil),
			"spec":     advSpec{IPAddressPools: poolNames},
		})
	}
	return resp, nil
}

// poolName is "<namespace>.<service>" for one Service: the dot cannot occur
// in either part, so, unlike upstream's stripped "<ns><svc>", two Services
// never collide. A shared pool is named after its first address, which
// stays put while Services join and leave it.
func poolName(p metallb.Pool) string {
	if !p.Shared() {
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
func poolMeta(name, ns string, p metallb.Pool) map[string]any {
	m := meta(name, ns, map[string]any{servicesAn: strings.Join(p.Services, ",")})
	labels := m["labels"].(map[string]any)
	for _, s := range p.Services {
		svcNS, svcName, _ := strings.Cut(s, "/")
		key, value := svcLabelPrefix+svcName, nsValuePrefix+svcNS
		if len(key) <= maxLabelName && len(value) <= maxLabelName {
			labels[key] = value
		}
	}
	return m
}

func meta(name, ns string, annotations map[string]any) map[string]any {
	m := map[string]any{
		"name":      name,
		"namespace": ns,
		"labels":    map[string]any{cpLabel: cpValue},
	}
	if len(annotations) > 0 {
		m["annotations"] = annotations
	}
	return m
}

// Typed specs encode much faster than maps inside the Wasm guest. Their
// fields are in the byte order of their JSON names, so the output is the
// same canonical, sorted JSON that maps give (the golden files and the
// host's re-encoding agree byte for byte).
type poolSpec struct {
	Addresses  []string `json:"addresses"`
	AutoAssign bool     `json:"autoAssign"`
}

type selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type peerSpec struct {
	MyASN         uint32     `json:"myASN"`
	NodeSelectors []selector `json:"nodeSelectors"`
	Password      string     `json:"password,omitempty"`
	PeerASN       uint32     `json:"peerASN"`
	PeerAddress   string     `json:"peerAddress"`
	PeerPort      int        `json:"peerPort"`
	SourceAddress string     `json:"sourceAddress,omitempty"`
}

type advSpec struct {
	IPAddressPools []string `json:"ipAddressPools"`
}
