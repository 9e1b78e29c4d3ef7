package main

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// fakePassword is the BGP password of every fixture peer; tests look for it
// to prove where it does and does not appear.
const fakePassword = "fake-bgp-password-for-tests"

// birdOptions are the options of wasm:///…/bird.wasm?namespace=bird.
var birdOptions = sdk.Options{Params: map[string]string{ParamNamespace: "bird"}}

func svc(ns, name string, ip string, sharing string, ports ...sdk.Port) sdk.Service {
	s := sdk.Service{Namespace: ns, Name: name, UID: "uid-" + ns + "-" + name, IPs: []string{ip}, Ports: ports, SharingKey: sharing}
	if sharing != "" {
		s.Annotations = map[string]string{"metallb.universe.tf/allow-shared-ip": sharing}
	}
	return s
}

func tcp(p int32) sdk.Port { return sdk.Port{Protocol: "TCP", Port: p} }
func udp(p int32) sdk.Port { return sdk.Port{Protocol: "UDP", Port: p} }

// fixtureServices has a plain Service, a bring-your-own address, a TCP+UDP
// pair sharing one address, and addresses whose string order differs from
// their numeric order (.10 after .9).
func fixtureServices() []sdk.Service {
	return []sdk.Service{
		svc("default", "nginx", "145.40.1.10", "", tcp(80), tcp(443)),
		svc("default", "byo", "145.40.90.10", "", tcp(443)),
		svc("kube-system", "dns-tcp", "145.40.1.7", "dns", tcp(53)),
		svc("kube-system", "dns-udp", "145.40.1.7", "dns", udp(53)),
		svc("shop", "web", "145.40.1.9", "", tcp(8080)),
	}
}

// node is a BGP node whose peers are listed out of order on purpose, each
// multihop as Equinix Metal reports its neighbours.
func node(name, src string, peers ...string) sdk.Node {
	n := sdk.Node{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}, LocalASN: 65000, SourceIP: src, Peers: []sdk.Peer{}}
	for _, p := range peers {
		n.Peers = append(n.Peers, sdk.Peer{ASN: 65530, IP: p, Password: fakePassword, Multihop: true})
	}
	return n
}

func fixtureNodes() []sdk.Node {
	return []sdk.Node{
		node("worker-2", "10.66.0.2", "169.254.255.2", "169.254.255.1"),
		node("worker-1", "10.66.0.1", "169.254.255.2", "169.254.255.1"),
	}
}

// goldenCase is one input of the golden test and the BIRD parser test.
type goldenCase struct {
	name string
	req  sdk.GenerateRequest
	// params are added to birdOptions' (the BGP timers and BFD).
	params map[string]string
}

// options are the module options of c: birdOptions and c's params.
func (c goldenCase) options() sdk.Options {
	params := map[string]string{}
	for k, v := range birdOptions.Params {
		params[k] = v
	}
	for k, v := range c.params {
		params[k] = v
	}
	return sdk.Options{Params: params}
}

// timersAndBFD are the options the CCM passes for bgpHoldTime: 9s,
// bgpKeepaliveTime: 3s and bgpBFDInterval: 300ms.
var timersAndBFD = map[string]string{ParamHoldTime: "9s", ParamKeepaliveTime: "3s", ParamBFDInterval: "300ms"}

func goldenCases() []goldenCase {
	return []goldenCase{
		{name: "services", req: sdk.GenerateRequest{Services: fixtureServices(), Nodes: fixtureNodes()}},
		{name: "no-services", req: sdk.GenerateRequest{Nodes: fixtureNodes()}},
		{name: "no-peers", req: sdk.GenerateRequest{Services: fixtureServices(), Nodes: []sdk.Node{node("worker-1", "10.66.0.1")}}},
		{name: "no-nodes", req: sdk.GenerateRequest{Services: fixtureServices()}},
		{name: "timers-bfd", req: sdk.GenerateRequest{Services: fixtureServices(), Nodes: fixtureNodes()}, params: timersAndBFD},
	}
}

// handle runs req through Module.HandleGenerate, the exact JSON path the
// Wasm export takes, with the envelope and options the host would set.
func handle(t testing.TB, opts sdk.Options, req sdk.GenerateRequest) ([]byte, error) {
	t.Helper()
	req.APIVersion, req.Kind, req.Options = sdk.APIVersion, sdk.KindGenerateRequest, opts
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return Module.HandleGenerate(in)
}

// configMapData returns the data of the single ConfigMap in resp.
func configMapData(t testing.TB, resp sdk.GenerateResponse) map[string]string {
	t.Helper()
	if len(resp.Objects) != 1 {
		t.Fatalf("got %d objects, want exactly one ConfigMap", len(resp.Objects))
	}
	raw, ok := resp.Objects[0]["data"].(map[string]any)
	if !ok {
		t.Fatalf("ConfigMap without data: %v", resp.Objects[0])
	}
	out := map[string]string{}
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("data[%q] is %T, want a string", k, v)
		}
		out[k] = s
	}
	return out
}

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// withOptions is c's request with the envelope and options the host sets.
func withOptions(c goldenCase) sdk.GenerateRequest {
	req := c.req
	req.APIVersion, req.Kind, req.Options = sdk.APIVersion, sdk.KindGenerateRequest, c.options()
	return req
}
