// Package golden runs every built-in module over the same inputs and
// compares the output with golden files (go test -update rewrites them).
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// FakePassword is the BGP password in every fixture; it is clearly fake.
const FakePassword = "fake-bgp-password-for-tests"

// Templates are the default annotation templates.
var Templates = sdk.AnnotationTemplates{
	LocalASN: "metal.equinix.com/bgp-peers-{{n}}-node-asn",
	PeerASN:  "metal.equinix.com/bgp-peers-{{n}}-peer-asn",
	PeerIP:   "metal.equinix.com/bgp-peers-{{n}}-peer-ip",
	SrcIP:    "metal.equinix.com/bgp-peers-{{n}}-src-ip",
	BGPPass:  "metal.equinix.com/bgp-peers-{{n}}-bgp-pass",
}

// Case is one input shared by every built-in.
type Case struct {
	Name    string
	Options sdk.Options
	Request sdk.GenerateRequest
	// Existing is the whole cluster state the fixture has; each module sees
	// only what its describe asks to read.
	Existing []sdk.Object
}

func services() []sdk.Service {
	return []sdk.Service{
		{Namespace: "ai", Name: "trainer", UID: "uid-trainer", IPs: []string{"145.40.1.6"},
			Ports: []sdk.Port{{Name: "grpc", Protocol: "TCP", Port: 9000}}},
		{Namespace: "default", Name: "nginx", UID: "uid-nginx", IPs: []string{"145.40.1.5"},
			Ports: []sdk.Port{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "https", Protocol: "TCP", Port: 443}}},
		{Namespace: "kube-system", Name: "dns-tcp", UID: "uid-dns-tcp", IPs: []string{"145.40.1.7"}, SharingKey: "dns",
			Ports:       []sdk.Port{{Protocol: "TCP", Port: 53}},
			Annotations: map[string]string{"metallb.universe.tf/allow-shared-ip": "dns"}},
		{Namespace: "kube-system", Name: "dns-udp", UID: "uid-dns-udp", IPs: []string{"145.40.1.7"}, SharingKey: "dns",
			Ports:       []sdk.Port{{Protocol: "UDP", Port: 53}},
			Annotations: map[string]string{"metallb.universe.tf/allow-shared-ip": "dns"}},
	}
}

func nodes() []sdk.Node {
	var out []sdk.Node
	for i, name := range []string{"worker-1", "worker-2", "worker-3"} {
		out = append(out, sdk.Node{
			Name:     name,
			Labels:   map[string]string{"kubernetes.io/hostname": name},
			LocalASN: 65000,
			SourceIP: "10.66.0." + string(rune('1'+i)),
			// Out of order on purpose: peers are indexed by sorted IP.
			Peers: []sdk.Peer{
				{ASN: 65530, IP: "169.254.255.2", Password: FakePassword},
				{ASN: 65530, IP: "169.254.255.1", Password: FakePassword},
			},
		})
	}
	return out
}

// Obj decodes a JSON object literal; fixtures read better as JSON.
func Obj(s string) sdk.Object {
	var o sdk.Object
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&o); err != nil {
		panic(err)
	}
	return o
}

// UserObjects are objects a user made: a labelled BGPAdvertisement of their
// own, the CCM's previous default advertisement, and a legacy ConfigMap
// holding the user's peer and pool next to stale CCM entries.
var UserObjects = []sdk.Object{
	Obj(`{"apiVersion":"metallb.io/v1beta1","kind":"BGPAdvertisement","metadata":{"name":"mine","namespace":"metallb-system","labels":{"cloud-provider":"equinix-metal"}},"spec":{"communities":["65535:65282"]}}`),
	Obj(`{"apiVersion":"metallb.io/v1beta1","kind":"BGPAdvertisement","metadata":{"name":"equinix-metal-bgp-adv","namespace":"metallb-system","labels":{"cloud-provider":"equinix-metal","lb.metal.equinix.com/owned-by":"cloud-provider-equinix-metal"}},"spec":{"ipAddressPools":["default.old"]}}`),
	Obj(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"config","namespace":"metallb-system"},"data":{"config":` + strconvQuote(legacyConfig) + `}}`),
}

const legacyConfig = `# the user's MetalLB 0.12 configuration
peers:
- peer-address: 192.0.2.1
  peer-asn: 64512
  my-asn: 64513
- peer-address: 169.254.255.1
  peer-asn: 65530
  my-asn: 65000
  node-selectors:
  - match-labels:
      kubernetes.io/hostname: gone-node
  - match-labels:
      nomatch.metal.equinix.com/service-namespace: default
      nomatch.metal.equinix.com/service-name: old
bgp-communities:
  no-advertise: 65535:65282
address-pools:
- name: user-pool
  protocol: bgp
  addresses:
  - 198.51.100.0/24
- name: default/old
  protocol: bgp
  auto-assign: false
  addresses:
  - 145.40.1.99/32
`

// UpstreamPeers are BGPPeers as upstream v3.8.1 leaves them (its hostname
// selector, then a never-matching one per Service it served), one of them
// already taken over by this CCM, one a user gave a selector of their own,
// and one whose node is not the node of its name.
var UpstreamPeers = []sdk.Object{
	Obj(`{"apiVersion":"metallb.io/v1beta2","kind":"BGPPeer","metadata":{"name":"worker-1-0","namespace":"metallb-system","labels":{"cloud-provider":"equinix-metal"}},"spec":{"holdTime":"0s","myASN":65000,"peerASN":65530,"peerAddress":"169.254.255.1","peerPort":179,"sourceAddress":"10.66.0.1",` + upstreamSelectors("worker-1") + `}}`),
	Obj(`{"apiVersion":"metallb.io/v1beta2","kind":"BGPPeer","metadata":{"name":"worker-1-1","namespace":"metallb-system","labels":{"cloud-provider":"equinix-metal","lb.metal.equinix.com/owned-by":"cloud-provider-equinix-metal","lb.metal.equinix.com/upstream-selectors":"kept"}},"spec":{"myASN":65000,"peerASN":65530,"peerAddress":"169.254.255.2","peerPort":179,"sourceAddress":"10.66.0.1",` + upstreamSelectors("worker-1") + `}}`),
	Obj(`{"apiVersion":"metallb.io/v1beta2","kind":"BGPPeer","metadata":{"name":"worker-2-0","namespace":"metallb-system","labels":{"cloud-provider":"equinix-metal"}},"spec":{"myASN":65000,"peerASN":65530,"peerAddress":"169.254.255.1","peerPort":179,"nodeSelectors":[{"matchLabels":{"kubernetes.io/hostname":"worker-2"}},{"matchLabels":{"rack":"a"}}]}}`),
	Obj(`{"apiVersion":"metallb.io/v1beta2","kind":"BGPPeer","metadata":{"name":"worker-2-1","namespace":"metallb-system","labels":{"cloud-provider":"equinix-metal"}},"spec":{"myASN":65000,"peerASN":65530,"peerAddress":"169.254.255.2","peerPort":179,` + upstreamSelectors("worker-9") + `}}`),
	// The CCM's own peer, which the module does not read.
	Obj(`{"apiVersion":"metallb.io/v1beta2","kind":"BGPPeer","metadata":{"name":"worker-3-0","namespace":"metallb-system","labels":{"cloud-provider":"equinix-metal","lb.metal.equinix.com/owned-by":"cloud-provider-equinix-metal"}},"spec":{"myASN":65000,"peerASN":65530,"peerAddress":"169.254.255.1","peerPort":179,` + upstreamSelectors("worker-3") + `}}`),
}

// upstreamSelectors is upstream's nodeSelectors member for a peer of the
// node of that hostname, serving two Services.
func upstreamSelectors(hostname string) string {
	return `"nodeSelectors":[{"matchLabels":{"kubernetes.io/hostname":"` + hostname + `"}},` +
		`{"matchLabels":{"nomatch.metal.equinix.com/service-name":"nginx","nomatch.metal.equinix.com/service-namespace":"default"}},` +
		`{"matchLabels":{"nomatch.metal.equinix.com/service-name":"trainer","nomatch.metal.equinix.com/service-namespace":"ai"}}]`
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// located are services() with the locations of their Elastic IPs (metro
// sv; a facility's reservation, da11 in metro da) and one Service whose
// address the host could not locate; their nodes are two in sv and one in
// da11, labelled as this CCM labels nodes.
func located() sdk.GenerateRequest {
	svcs := services()
	for i := range svcs {
		s := &svcs[i]
		switch s.Name {
		case "trainer":
			s.Locations = []sdk.AddressLocation{{IP: s.IPs[0], Metro: "da", Facility: "da11"}}
		default:
			s.Locations = []sdk.AddressLocation{{IP: s.IPs[0], Metro: "sv"}}
		}
	}
	svcs = append(svcs, sdk.Service{Namespace: "default", Name: "unlocated", UID: "uid-unlocated", IPs: []string{"145.40.1.8"},
		Ports: []sdk.Port{{Name: "http", Protocol: "TCP", Port: 80}}})
	ns := nodes()
	for i := range ns {
		ns[i].Labels[sdk.MetroLabel] = "sv"
		if ns[i].Name == "worker-3" {
			ns[i].Labels[sdk.MetroLabel], ns[i].Labels[sdk.FacilityLabel] = "da", "da11"
		}
	}
	return sdk.GenerateRequest{Services: svcs, Nodes: ns, Annotations: Templates}
}

// dualStack is located() with IPv6 (ABI version 5): a dual-stack Service
// and a sharing key's dual-stack address pair in metro sv (IPv4 and IPv6
// each located), an IPv6-only Service, the IPv4-only Service of da11 and
// the unlocated one; the two nodes in sv have IPv6 sessions (their
// device's public IPv6 as source, Equinix's fc00::e and fc00::f, given out
// of order), the one in da11 has none.
func dualStack() sdk.GenerateRequest {
	req := located()
	v6 := map[string]string{"nginx": "2604:1380:4641:c500::5", "dns-tcp": "2604:1380:4641:c500::7", "dns-udp": "2604:1380:4641:c500::7"}
	for i := range req.Services {
		s := &req.Services[i]
		if ip, ok := v6[s.Name]; ok {
			s.IPs = append(s.IPs, ip)
			s.Locations = append(s.Locations, sdk.AddressLocation{IP: ip, Metro: "sv"})
		}
	}
	req.Services = append(req.Services, sdk.Service{Namespace: "default", Name: "v6-only", UID: "uid-v6-only",
		IPs: []string{"2604:1380:4641:c500::8"}, Ports: []sdk.Port{{Name: "http", Protocol: "TCP", Port: 80}},
		Locations: []sdk.AddressLocation{{IP: "2604:1380:4641:c500::8", Metro: "sv"}}})
	slices.SortFunc(req.Services, func(a, b sdk.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for i := range req.Nodes {
		n := &req.Nodes[i]
		if n.Labels[sdk.MetroLabel] != "sv" {
			continue
		}
		n.SourceIPv6 = "2604:1380:4641:c5" + string(rune('0'+i)) + "0::1"
		n.Peers = append(n.Peers,
			sdk.Peer{ASN: 65530, IP: "fc00::f", Password: FakePassword},
			sdk.Peer{ASN: 65530, IP: "fc00::e", Password: FakePassword})
	}
	return req
}

// Cases are the shared inputs.
func Cases() []Case {
	base := sdk.GenerateRequest{Services: services(), Nodes: nodes(), Annotations: Templates}
	noSvc := sdk.GenerateRequest{Nodes: nodes(), Annotations: Templates}
	return []Case{
		{Name: "services", Request: base},
		{Name: "located", Request: located()},
		{Name: "no-services", Request: noSvc},
		{Name: "user-objects", Request: base, Existing: UserObjects},
		{Name: "other-namespace", Options: sdk.Options{Namespace: "lb", ConfigMap: "metallb", Params: map[string]string{"x": "y"}}, Request: base},
		// MetalLB in FRR mode, which announces IPv6, and in native mode
		// (the default), which does not.
		{Name: "dual-stack", Options: sdk.Options{Params: map[string]string{"bgpType": "frr"}}, Request: dualStack(), Existing: UserObjects[2:]},
		{Name: "dual-stack-native", Request: dualStack(), Existing: UserObjects[2:]},
		// Every peer multihop, as Equinix reports its neighbours (ABI
		// version 6), in MetalLB's native mode and, dual-stack, in FRR
		// mode.
		{Name: "multihop", Request: multihop(sdk.GenerateRequest{Services: services(), Nodes: nodes(), Annotations: Templates}), Existing: UserObjects[2:]},
		{Name: "multihop-dual-stack", Options: sdk.Options{Params: map[string]string{"bgpType": "frr"}}, Request: multihop(dualStack())},
		// BGP timers chosen for a fast failover (bgpHoldTime,
		// bgpKeepaliveTime), in FRR mode and in native mode, whose speaker
		// refuses a keepaliveTime.
		{Name: "timers", Options: sdk.Options{Params: map[string]string{"holdTime": "9s", "keepaliveTime": "3s", "bgpType": "frr"}}, Request: multihop(sdk.GenerateRequest{Services: services(), Nodes: nodes(), Annotations: Templates}), Existing: UserObjects[2:]},
		{Name: "timers-native", Options: sdk.Options{Params: map[string]string{"holdTime": "9s", "keepaliveTime": "3s"}}, Request: multihop(sdk.GenerateRequest{Services: services(), Nodes: nodes(), Annotations: Templates}), Existing: UserObjects[2:]},
		// BFD (bgpBFDInterval, bgpBFDMultiplier) for the FRR-based
		// speakers, and in native mode, whose speaker runs none.
		{Name: "bfd", Options: sdk.Options{Params: map[string]string{"bfdInterval": "300ms", "bfdMultiplier": "3", "holdTime": "9s", "bgpType": "frr-k8s"}}, Request: multihop(sdk.GenerateRequest{Services: services(), Nodes: nodes(), Annotations: Templates}), Existing: UserObjects[2:]},
		{Name: "bfd-native", Options: sdk.Options{Params: map[string]string{"bfdInterval": "300ms"}}, Request: multihop(sdk.GenerateRequest{Services: services(), Nodes: nodes(), Annotations: Templates}), Existing: UserObjects[2:]},
		// A take-over from upstream v3.8.1's BGPPeers, as Equinix reports
		// its neighbours, in MetalLB's native mode.
		{Name: "take-over", Request: multihop(sdk.GenerateRequest{Services: services(), Nodes: nodes(), Annotations: Templates}), Existing: append(slices.Clone(UpstreamPeers), UserObjects[2:]...)},
	}
}

// multihop is req with every peer multihop.
func multihop(req sdk.GenerateRequest) sdk.GenerateRequest {
	for i := range req.Nodes {
		for j := range req.Nodes[i].Peers {
			req.Nodes[i].Peers[j].Multihop = true
		}
	}
	return req
}

// Visible filters the fixture's cluster state down to what d asks to read,
// as the host does (the API server's label selector syntax).
func Visible(d sdk.Description, all []sdk.Object) []sdk.Object {
	var out []sdk.Object
	for _, o := range all {
		for _, r := range d.Reads {
			if o.APIVersion() != r.APIVersion || o.Kind() != r.Kind || (r.Namespace != "" && o.Namespace() != r.Namespace) || (r.Name != "" && o.Name() != r.Name) {
				continue
			}
			if !matches(r.LabelSelector, o.Labels()) {
				continue
			}
			out = append(out, o)
			break
		}
	}
	sdk.SortObjects(out)
	return out
}

func matches(sel string, set map[string]string) bool {
	s, err := labels.Parse(sel)
	if err != nil {
		panic(err) // describe's selectors are validated before they get here
	}
	return s.Matches(labels.Set(set))
}

// Run runs m over every case through the same JSON path the Wasm glue uses,
// checks that two calls give byte-identical output, and compares it with
// testdata/<case>.json.
func Run(t *testing.T, m sdk.Module) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			out := Generate(t, m, c)
			again := Generate(t, m, c)
			if !bytes.Equal(out, again) {
				t.Fatalf("two generate calls on the same input differ:\n%s\n%s", out, again)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, out, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			path := filepath.Join("testdata", c.Name+".json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v; run go test -update to create it", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("output differs from %s (go test -update rewrites it):\n%s", path, pretty.String())
			}
		})
	}
}

// Request builds the generate request m sees for c, JSON-encoded.
func Request(t testing.TB, m sdk.Module, c Case) []byte {
	t.Helper()
	dreq, _ := json.Marshal(sdk.DescribeRequest{APIVersion: sdk.APIVersion, Kind: sdk.KindDescribeRequest, Options: c.Options})
	dout, err := m.HandleDescribe(dreq)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	var d sdk.Description
	if err := json.Unmarshal(dout, &d); err != nil {
		t.Fatal(err)
	}
	req := c.Request
	req.APIVersion, req.Kind, req.Options = sdk.APIVersion, sdk.KindGenerateRequest, c.Options
	req.Existing = Visible(d, c.Existing)
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Generate runs m's generate handler on case c and returns its raw output.
func Generate(t testing.TB, m sdk.Module, c Case) []byte {
	t.Helper()
	out, err := m.HandleGenerate(Request(t, m, c))
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	return out
}
