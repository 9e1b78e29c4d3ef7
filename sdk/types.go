// Package sdk is what a load-balancer module for the Equinix Metal cloud
// controller manager is written with (ABI ccm_lb_v1).
//
// A module is a pure function: the host hands it a snapshot of the cluster
// (Services with addresses, BGP nodes with peers, the objects it asked to
// read) and it returns the complete desired set of Kubernetes objects plus
// node annotations. The host, never the module, talks to Kubernetes: it
// validates the output, applies it with server-side apply and prunes what is
// no longer desired. Because the module only transforms data, authors test
// it with plain `go test`; the wasip1 glue in this package is compiled only
// for GOOS=wasip1.
//
// The types here import nothing from k8s.io on purpose: it keeps modules
// small and keeps the payload a plain, versioned JSON document that any
// language could produce.
package sdk

import (
	"bytes"
	"encoding/json"
)

// APIVersion versions the JSON payloads, apart from the ABI (the import
// module name ccm_lb_v1). Additive fields keep it; breaking changes get a new
// one.
const APIVersion = "lb.metal.equinix.com/v1alpha1"

// ABIVersion is what ccm_abi_version returns. Version 6 receives the
// GenerateRequest in the binary layout of EncodeGenerateRequest, with each
// Peer's Multihop; and answers in the layout of EncodeGenerateResponse.
// Version 5 is the same without Multihop (the layout of
// EncodeGenerateRequestV5; the host sends every peer with Multihop false).
// Version 5 brought IPv6: IPv6 addresses in Service.IPs and
// Service.Locations, IPv6 peers in Node.Peers and Node.SourceIPv6.
// Version 4 is version 5 without IPv6 (the layout
// of EncodeGenerateRequestV4; the host leaves out IPv6 addresses, a Service
// left with none, IPv6 peers and SourceIPv6). Version 3 is version 4
// without Service.Locations (the layout of EncodeGenerateRequestV2).
// Version 2 receives that binary request and answers in JSON; version 1
// speaks JSON both ways, without Service.Locations. Modules built with an
// older SDK speak those, and the host still does, sending each exactly the
// request it was built for. It refuses any other.
const ABIVersion = 6

// MinABIVersion is the oldest ABI version the host still speaks.
const MinABIVersion = 1

// Payload kinds.
const (
	KindDescribeRequest  = "DescribeRequest"
	KindDescribeResponse = "DescribeResponse"
	KindGenerateRequest  = "GenerateRequest"
	KindGenerateResponse = "GenerateResponse"
)

// Options are the module's settings from the loadbalancer URL.
//
// For metallb:///<ns>/<configmap>?a=b, Namespace is <ns>, ConfigMap is
// <configmap> and Params is {"a": "b"}. crdConfiguration (it selects the
// built-in) and sha256 (it pins the file) are not passed.
type Options struct {
	Namespace string            `json:"namespace,omitempty"`
	ConfigMap string            `json:"configMap,omitempty"`
	Params    map[string]string `json:"params,omitempty"`
}

// DescribeRequest is the input of ccm_lb_describe: the module's options, so
// that what it declares (for example which ConfigMap it reads) may depend on
// them.
type DescribeRequest struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Options    Options `json:"options"`
}

// Description is the output of ccm_lb_describe. The host enforces it: an
// object of a kind not listed in Emits, or in another namespace, fails the
// whole generate call and changes nothing in the cluster.
type Description struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name and Version identify the module in logs, events and metrics.
	Name    string `json:"name"`
	Version string `json:"version"`
	// Emits lists every kind of object the module may return. The host prunes
	// owned objects of exactly these kinds, so a kind missing here is never
	// cleaned up.
	Emits []ObjectKind `json:"emits,omitempty"`
	// Reads lists the existing objects the host fetches before each generate
	// call and passes in GenerateRequest.Existing.
	Reads []ObjectRead `json:"reads,omitempty"`
	// NodeAnnotations says whether the module returns node annotations.
	NodeAnnotations bool `json:"nodeAnnotations,omitempty"`
}

// ObjectKind is one kind a module may emit. Namespace is where objects of a
// namespaced kind must be; empty means the kind is cluster-scoped.
type ObjectKind struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
}

// ObjectRead asks the host for existing objects: one object by Name, or
// every object matching LabelSelector (Kubernetes selector syntax, for
// example "cloud-provider=equinix-metal") in Namespace.
//
// An object read by Name and also emitted is a merge target, owned by the
// user: the host applies the fields the module returns, but never labels it
// as owned and never deletes it.
type ObjectRead struct {
	APIVersion    string `json:"apiVersion"`
	Kind          string `json:"kind"`
	Namespace     string `json:"namespace,omitempty"`
	Name          string `json:"name,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
}

// GenerateRequest is the input of ccm_lb_generate: the whole snapshot, not a
// delta, so the module never needs memory between calls.
type GenerateRequest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// MemoryLimitBytes is the host's memory limit for this call. The SDK
	// tunes the Go garbage collector to it; a module need not look at it.
	MemoryLimitBytes int64   `json:"memoryLimitBytes,omitempty"`
	Options          Options `json:"options"`
	// Services are the Services that have an address, sorted by namespace
	// and name.
	Services []Service `json:"services"`
	// Nodes are the BGP-selected nodes, sorted by name.
	Nodes []Node `json:"nodes"`
	// Annotations are the node annotation name templates; {{n}} stands for
	// the peer's index.
	Annotations AnnotationTemplates `json:"annotations"`
	// Existing holds the current state of the objects asked for in
	// Description.Reads, sorted, without managedFields; an object that does
	// not exist is absent. Numbers in them are json.Number, so that large
	// integers stay exact.
	Existing []Object `json:"existing,omitempty"`
}

// Service is a Service of type LoadBalancer that has an address.
type Service struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// IPs are plain addresses such as 145.40.1.5 or, from ABI version 5
	// on, 2604:1380:4641:c500::3 (a dual-stack Service has one of each),
	// IPv4 before IPv6.
	IPs         []string          `json:"ips"`
	Ports       []Port            `json:"ports,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// SharingKey is the Service's IP-sharing key, if any: the
	// metallb.io/allow-shared-ip annotation, else the older
	// metallb.universe.tf/allow-shared-ip (MetalLB's precedence). Services
	// with one key have the same Elastic IP (one reservation for the key).
	SharingKey string `json:"sharingKey,omitempty"`
	// Locations say where the project reserved the addresses of IPs that
	// are its Elastic IPs, one entry per such address, sorted by IP; an
	// address without an entry has no known location. An Elastic IP is
	// routed only in its metro (a facility's reservation: in its
	// facility), so only nodes there should announce it: a node's metro is
	// its MetroLabel, its facility its FacilityLabel. The host sends them
	// to modules of ABI version 4 and later (those of IPv6 addresses from
	// version 5 on).
	Locations []AddressLocation `json:"locations,omitempty"`
}

// AddressLocation is where one Elastic IP is reserved: its metro, and its
// facility when the reservation was made in one (the Equinix Metal API
// gives a facility's reservation its metro too). Either may be empty when
// the API did not say.
type AddressLocation struct {
	IP       string `json:"ip"`
	Metro    string `json:"metro,omitempty"`
	Facility string `json:"facility,omitempty"`
}

// The node labels that say where a node is, which this CCM sets from its
// device (k8s.io/cloud-provider's well-known topology labels): the metro
// code as region, the facility code as zone.
const (
	MetroLabel    = "topology.kubernetes.io/region"
	FacilityLabel = "topology.kubernetes.io/zone"
)

// Port is one Service port.
type Port struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
}

// Node is a BGP-selected node with its BGP session data.
//
// Equinix Metal gives a node separate sessions per address family: its IPv4
// peers (169.254.255.1 and .2) are reached from SourceIP, its IPv6 peers
// (fc00::e and fc00::f) from SourceIPv6, and each session carries the
// addresses of its own family only (a MetalLB BGPPeer without
// dualStackAddressFamily).
type Node struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	LocalASN uint32            `json:"localASN"`
	// SourceIP is the node's source address for its IPv4 peers.
	SourceIP string `json:"sourceIP"`
	// Peers are the node's BGP neighbours: its IPv4 peers and, from ABI
	// version 5 on, its IPv6 peers after them (a peer's family is that of
	// its IP: IsIPv6). The host sends IPv6 peers only once a Service has
	// an IPv6 address.
	Peers []Peer `json:"peers"`
	// SourceIPv6 is the node's source address for its IPv6 peers (its
	// device's public IPv6); empty when it has none. ABI version 5 and
	// later.
	SourceIPv6 string `json:"sourceIPv6,omitempty"`
}

// Peer is one BGP neighbour of a node, of the address family of its IP.
type Peer struct {
	ASN      uint32 `json:"asn"`
	IP       string `json:"ip"`
	Password Secret `json:"password,omitempty"`
	// Multihop is Equinix's word that the peer is not on a network the
	// node is connected to: its address is a router's loopback behind the
	// node's gateway, so a session needs a TTL above 1 and no connected
	// check (FRR's ebgp-multihop, GoBGP's and BIRD's multihop). Equinix
	// reports every neighbour so. ABI version 6 and later; an older module
	// gets it false.
	Multihop bool `json:"multihop,omitempty"`
}

// Secret is a string that formats as "[redacted]" with fmt (%v, %s, %+v,
// %#v), so a BGP password never reaches a log line by accident, while JSON
// still carries the real value across the ABI.
type Secret string

// String implements fmt.Stringer.
func (Secret) String() string { return "[redacted]" }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return `"[redacted]"` }

// AnnotationTemplates are the node annotation names, as configured in the
// CCM (annotationLocalASN and the like). {{n}} is the peer's index.
type AnnotationTemplates struct {
	LocalASN string `json:"localASN"`
	PeerASN  string `json:"peerASN"`
	PeerIP   string `json:"peerIP"`
	SrcIP    string `json:"srcIP"`
	BGPPass  string `json:"bgpPass"`
}

// GenerateResponse is the output of ccm_lb_generate: the complete desired
// state. An object the module owned before and no longer returns is deleted.
type GenerateResponse struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Objects    []Object `json:"objects"`
	// NodeAnnotations maps node name to the annotations the module wants on
	// it, beyond the BGP annotations the CCM core always writes.
	NodeAnnotations map[string]map[string]string `json:"nodeAnnotations,omitempty"`
	// Warnings are shown as Events and logs; they do not fail the call.
	Warnings []string `json:"warnings,omitempty"`
}

// Object is a Kubernetes object as JSON: apiVersion, kind, metadata (name,
// namespace, labels, annotations) and its content (spec, data, ...).
// encoding/json writes map keys sorted, so an Object encodes the same way
// every time.
type Object map[string]any

// ObjectFrom turns any JSON-encodable value (a typed struct, for example)
// into an Object.
func ObjectFrom(v any) (Object, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var o Object
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // exact integers, as in the request's objects
	if err := dec.Decode(&o); err != nil {
		return nil, err
	}
	return o, nil
}

// APIVersion returns the object's apiVersion, or "".
func (o Object) APIVersion() string { s, _ := o["apiVersion"].(string); return s }

// Kind returns the object's kind, or "".
func (o Object) Kind() string { s, _ := o["kind"].(string); return s }

// metadata returns a member of metadata (a map or Fields).
func (o Object) metadata(name string) any { return member(o["metadata"], name) }

// Name returns metadata.name, or "".
func (o Object) Name() string { s, _ := o.metadata("name").(string); return s }

// Namespace returns metadata.namespace, or "".
func (o Object) Namespace() string { s, _ := o.metadata("namespace").(string); return s }

// Labels returns metadata.labels as strings (non-strings are skipped).
func (o Object) Labels() map[string]string {
	out := map[string]string{}
	switch raw := o.metadata("labels").(type) {
	case map[string]any:
		for k, v := range raw {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
	case map[string]string:
		for k, v := range raw {
			out[k] = v
		}
	case Fields:
		for _, m := range raw {
			if s, ok := m.Value.(string); ok {
				out[m.Name] = s
			}
		}
	}
	return out
}

// Ownership: the host puts OwnedLabel=OwnedValue on every object it applies
// for a module (except merge targets) and prunes by it. A module reading
// existing objects uses it to tell its own from the user's.
const (
	OwnedLabel = "lb.metal.equinix.com/owned-by"
	OwnedValue = "cloud-provider-equinix-metal"
)
