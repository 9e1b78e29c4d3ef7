package lbsnapshot

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fakePassword is the BGP password in every fixture; it is clearly fake.
const fakePassword = "fake-bgp-password-for-tests"

var templates = Templates{
	LocalASN: config.DefaultAnnotationLocalASN, PeerASN: config.DefaultAnnotationPeerASN,
	PeerIP: config.DefaultAnnotationPeerIP, SrcIP: config.DefaultAnnotationSrcIP,
	BGPPass: config.DefaultAnnotationBGPPass, NetworkIPv4Private: "metal.equinix.com/network-4-private",
}

func mustLB(t *testing.T, url string) config.LoadBalancer {
	t.Helper()
	lb, err := config.ParseLoadBalancer(url)
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

// service is a LoadBalancer Service with the given ingress IPs.
func service(ns, name string, ips ...string) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func with(s *v1.Service, f func(*v1.Service)) *v1.Service { f(s); return s }

func shared(key string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Annotations = map[string]string{"metallb.universe.tf/allow-shared-ip": key}
	}
}

// node is a BGP node; its peers are out of IP order on purpose (the
// annotations index them by sorted IP, the request keeps them as given).
func node(name, sourceIP string, peerIPs ...string) Node {
	n := Node{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}, DeviceID: "device-" + name,
		LocalASN: 65000, SourceIP: sourceIP, PrivateNetwork: "10.66.0.0/25"}
	for _, ip := range peerIPs {
		n.Peers = append(n.Peers, Peer{ASN: 65530, IP: ip, Password: fakePassword})
	}
	return n
}

// withIPv6 gives a node its device's IPv6 source and IPv6 peers (here out
// of IP order too: the request sorts them).
func withIPv6(n Node, sourceIPv6 string, peerIPs ...string) Node {
	n.SourceIPv6 = sourceIPv6
	for _, ip := range peerIPs {
		n.PeersV6 = append(n.PeersV6, Peer{ASN: 65530, IP: ip, Password: fakePassword})
	}
	return n
}

func cases(t *testing.T) []struct {
	name string
	in   Input
} {
	crd := mustLB(t, "metallb:///metallb-system")
	workers := []Node{
		node("worker-2", "10.66.0.2", "169.254.255.2", "169.254.255.1"),
		node("worker-1", "10.66.0.1", "169.254.255.2", "169.254.255.1"),
	}
	class := "other.io/lb"
	return []struct {
		name string
		in   Input
	}{
		{"no-services", Input{LB: crd, Templates: templates, Nodes: workers}},
		{"no-nodes", Input{LB: mustLB(t, "kube-vip://"), Templates: templates,
			Services: []*v1.Service{service("default", "web", "145.40.1.5")}}},
		{"shared-ip", Input{LB: crd, Templates: templates, Nodes: workers, Services: []*v1.Service{
			with(service("kube-system", "dns-udp", "145.40.1.7"), shared("dns")),
			with(service("kube-system", "dns-tcp", "145.40.1.7"), shared("dns")),
			service("default", "web", "145.40.1.5"),
		}}},
		// Addresses are the ingress IPs, deduplicated and sorted, or else
		// spec.loadBalancerIP where the CCM wrote it (upstream's record of
		// the EIP); a Service with neither is left out, and so is a user's
		// own address not yet accepted into the status.
		{"dual-stack-and-own-ip", Input{LB: crd, Templates: templates, Nodes: workers, Services: []*v1.Service{
			service("default", "dual", "2604:1380:4641::5", "145.40.1.5", "145.40.1.5"),
			with(service("default", "own-ip"), func(s *v1.Service) {
				s.Spec.LoadBalancerIP = "145.40.9.9"
				s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fieldmanager.CCM, Operation: metav1.ManagedFieldsOperationUpdate,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:loadBalancerIP":{}}}`)}}
			}),
			with(service("default", "own-ip-not-accepted"), func(s *v1.Service) { s.Spec.LoadBalancerIP = "145.40.9.6" }),
			with(service("default", "own-ip-assigned", "145.40.9.8"), func(s *v1.Service) { s.Spec.LoadBalancerIP = "145.40.9.7" }),
			service("default", "pending"),
		}}},
		// A node whose device has no BGP neighbours yet is still a BGP node:
		// the module sees it with an empty peer list.
		{"node-without-peers", Input{LB: crd, Templates: templates, Services: []*v1.Service{service("default", "web", "145.40.1.5")},
			Nodes: []Node{node("worker-1", "10.66.0.1", "169.254.255.1"), node("worker-new", "10.66.0.3")}}},
		// Services of another load balancer (a loadBalancerClass), the
		// control-plane Service (it has its own EIP) and Services that are
		// not of type LoadBalancer never reach a module.
		{"services-not-ours", Input{LB: mustLB(t, "metallb:///lb/config?x=y"), Templates: templates, Nodes: workers, Services: []*v1.Service{
			service("default", "web", "145.40.1.5"),
			with(service("default", "classy", "145.40.1.8"), func(s *v1.Service) { s.Spec.LoadBalancerClass = &class }),
			service("kube-system", "cloud-provider-equinix-metal-kubernetes-external", "145.40.1.100"),
			with(service("default", "kubernetes", "10.96.0.1"), func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }),
		}}},
		// MetalLB's two annotation forms: the metallb.io/ one wins, even
		// empty (no sharing); every annotation reaches the module as it is.
		{"sharing-annotation-forms", Input{LB: crd, Templates: templates, Nodes: workers, Services: []*v1.Service{
			with(service("default", "current", "145.40.1.7"), annotated(map[string]string{SharingAnnotation: "web"})),
			with(service("default", "legacy", "145.40.1.7"), annotated(map[string]string{LegacySharingAnnotation: "web"})),
			with(service("default", "both", "145.40.1.8"), annotated(map[string]string{SharingAnnotation: "a", LegacySharingAnnotation: "b"})),
			with(service("default", "empty-current", "145.40.1.9"), annotated(map[string]string{SharingAnnotation: "", LegacySharingAnnotation: "b"})),
			with(service("default", "other-annotations", "145.40.1.10"), annotated(map[string]string{"metal.equinix.com/eip-metro": "da", "example.com/team": "web"})),
		}}},
		// A user's module gets its query parameters; the legacy ConfigMap
		// mode its ConfigMap. Ports keep their order and protocols.
		{"wasm-module-params", Input{LB: mustLB(t, "wasm:///modules/mine.wasm?pool=public&mode=bgp"), Templates: templates, Nodes: workers[:1], Services: []*v1.Service{
			with(service("default", "dns", "145.40.1.5"), func(s *v1.Service) {
				s.Spec.Ports = []v1.ServicePort{{Name: "dns-udp", Protocol: v1.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53}}
			}),
		}}},
		{"legacy-configmap", Input{LB: mustLB(t, "metallb:///metallb-system/config"), Templates: templates, Nodes: workers,
			Services: []*v1.Service{service("default", "web", "145.40.1.5")}}},
		// Where each address is reserved (the reservation cache): a
		// metro's reservation, a facility's (with its metro), an address
		// the cache does not know (no entry), and one of a dual-stack
		// Service's two addresses.
		{"locations", Input{LB: crd, Templates: templates, Nodes: workers, Services: []*v1.Service{
			service("default", "in-sv", "145.40.1.5"),
			service("default", "in-da11", "145.40.1.6"),
			service("default", "unknown", "145.40.1.7"),
			service("default", "dual", "2604:1380:4641::5", "145.40.1.8"),
		}, Locate: func(ip string) (sdk.AddressLocation, bool) {
			l, ok := map[string]sdk.AddressLocation{
				"145.40.1.5": {Metro: "sv"}, "145.40.1.6": {Metro: "da", Facility: "da11"}, "145.40.1.8": {Metro: "ny"},
			}[ip]
			return l, ok
		}}},
		// IPv6 (ABI version 5): a dual-stack Service's two addresses,
		// IPv4 first although its string sorts after the IPv6 one, both
		// located; an IPv6-only Service; nodes with their IPv6 peers
		// after the IPv4 ones, each family sorted by IP, and the IPv6
		// source; a node with no IPv6 session has neither.
		{"ipv6", Input{LB: crd, Templates: templates, Nodes: []Node{
			withIPv6(node("worker-1", "10.66.0.1", "169.254.255.2", "169.254.255.1"), "2604:1380:4641:c500::1", "fc00::f", "fc00::e"),
			withIPv6(node("worker-2", "10.66.0.2", "169.254.255.2", "169.254.255.1"), "2604:1380:4641:c600::1", "fc00::e", "fc00::f"),
			node("worker-3", "10.66.0.3", "169.254.255.1", "169.254.255.2"),
		}, Services: []*v1.Service{
			service("default", "dual", "2604:1380:4641:c500::3", "86.109.1.5"),
			service("default", "v6-only", "2604:1380:4641:c500:0:0:0:4"),
			service("default", "v4", "86.109.1.6"),
		}, Locate: func(ip string) (sdk.AddressLocation, bool) {
			l, ok := map[string]sdk.AddressLocation{
				"86.109.1.5": {Metro: "sv"}, "2604:1380:4641:c500::3": {Metro: "sv"}, "2604:1380:4641:c500::4": {Metro: "sv"},
			}[ip]
			return l, ok
		}}},
		// Services of many namespaces, given in no order: sorted by
		// namespace, then name.
		{"namespaces-sorted", Input{LB: crd, Templates: templates, Nodes: workers, Services: []*v1.Service{
			service("zeta", "a", "145.40.1.20"),
			service("default", "web-2", "145.40.1.6"),
			service("alpha", "z", "145.40.1.21"),
			service("default", "web-10", "145.40.1.5"),
		}}},
	}
}

func annotated(a map[string]string) func(*v1.Service) {
	return func(s *v1.Service) { s.Annotations = a }
}

func TestBuildGolden(t *testing.T) {
	for _, tc := range cases(t) {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.MarshalIndent(Build(tc.in), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tc.name+".json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v; run go test -update to create it", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("request differs from %s (go test -update rewrites it):\n%s", path, got)
			}
		})
	}
}

// The same cluster in any order gives byte-identical request bytes: the
// host memoises generate calls on them.
func TestBuildIgnoresInputOrder(t *testing.T) {
	for _, tc := range cases(t) {
		t.Run(tc.name, func(t *testing.T) {
			rev := tc.in
			rev.Services = append([]*v1.Service(nil), tc.in.Services...)
			rev.Nodes = append([]Node(nil), tc.in.Nodes...)
			for i, j := 0, len(rev.Services)-1; i < j; i, j = i+1, j-1 {
				rev.Services[i], rev.Services[j] = rev.Services[j], rev.Services[i]
			}
			for i, j := 0, len(rev.Nodes)-1; i < j; i, j = i+1, j-1 {
				rev.Nodes[i], rev.Nodes[j] = rev.Nodes[j], rev.Nodes[i]
			}
			a, _ := json.Marshal(Build(tc.in))
			b, _ := json.Marshal(Build(rev))
			if !bytes.Equal(a, b) {
				t.Fatalf("request depends on input order:\n%s\n%s", a, b)
			}
		})
	}
}

func TestModuleOptions(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want sdk.Options
	}{
		{"metallb:///", sdk.Options{Namespace: "metallb-system"}},
		{"metallb:///lb?crdConfiguration=true&x=y", sdk.Options{Namespace: "lb", Params: map[string]string{"x": "y"}}},
		{"metallb:///lb/cfg", sdk.Options{Namespace: "lb", ConfigMap: "cfg"}},
		{"kube-vip://", sdk.Options{}},
		{"empty://", sdk.Options{}},
		{"wasm:///m/mine.wasm?k=v", sdk.Options{Params: map[string]string{"k": "v"}}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			if got := ModuleOptions(mustLB(t, tc.url)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ModuleOptions = %+v, want %+v", got, tc.want)
			}
		})
	}
	// No parameters is nil, not an empty map: the describe and generate
	// requests encode the same way whatever the parser returned.
	if got := ModuleOptions(config.LoadBalancer{Kind: config.LBKubeVIP, Options: map[string]string{}}); got.Params != nil {
		t.Errorf("ModuleOptions of no parameters has Params %#v, want nil", got.Params)
	}
}

// TestOurLoadBalancer: the Services that reach a module are the service
// controller's (WantsLoadBalancer) but the control-plane Service.
func TestOurLoadBalancer(t *testing.T) {
	class := "other.io/lb"
	for _, tc := range []struct {
		name string
		svc  *v1.Service
		want bool
	}{
		{"LoadBalancer", service("default", "web"), true},
		{"another load balancer's", with(service("default", "web"), func(s *v1.Service) { s.Spec.LoadBalancerClass = &class }), false},
		{"ClusterIP", with(service("default", "web"), func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }), false},
		{"NodePort", with(service("default", "web"), func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort }), false},
		{"the control-plane Service", service("kube-system", "cloud-provider-equinix-metal-kubernetes-external"), false},
		{"its name in another namespace", service("default", "cloud-provider-equinix-metal-kubernetes-external"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ourLoadBalancer(tc.svc); got != tc.want {
				t.Errorf("ourLoadBalancer = %v, want %v", got, tc.want)
			}
			if tc.want && !WantsLoadBalancer(tc.svc) {
				t.Errorf("a Service the service controller never hands over reaches the module")
			}
		})
	}
}

func TestSortSnapshot(t *testing.T) {
	svc := func(ns, name string) sdk.Service { return sdk.Service{Namespace: ns, Name: name} }
	req := sdk.GenerateRequest{
		Services: []sdk.Service{svc("b", "a"), svc("a", "b"), svc("a", "a"), svc("a", "a-1")},
		Nodes:    []sdk.Node{{Name: "worker-2"}, {Name: "worker-10"}, {Name: "worker-1"}},
	}
	SortSnapshot(&req)
	var services, nodes []string
	for _, s := range req.Services {
		services = append(services, s.Namespace+"/"+s.Name)
	}
	for _, n := range req.Nodes {
		nodes = append(nodes, n.Name)
	}
	// Byte order, not natural order: what matters is that it is one order.
	if want := []string{"a/a", "a/a-1", "a/b", "b/a"}; !reflect.DeepEqual(services, want) {
		t.Errorf("Services %v, want %v", services, want)
	}
	if want := []string{"worker-1", "worker-10", "worker-2"}; !reflect.DeepEqual(nodes, want) {
		t.Errorf("nodes %v, want %v", nodes, want)
	}
}

// TestBuildOwnAddress: a user's own spec.loadBalancerIP, not yet in the
// status, enters the module's view only when the CCM serves it (the
// project holds it where the Service is placed):
// MetalLB allocates only from a pool the module wrote, so without this a
// held address would never reach the status.
func TestBuildOwnAddress(t *testing.T) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "byo", UID: "u1"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerIP: "198.18.63.10",
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	for _, tc := range []struct {
		name string
		held func(*v1.Service, string) bool
		want []string // the Service's IPs in the request; nil: left out
	}{
		{name: "no hook", held: nil},
		{name: "not served", held: func(*v1.Service, string) bool { return false }},
		{name: "served", held: func(s *v1.Service, ip string) bool { return s == svc && ip == "198.18.63.10" }, want: []string{"198.18.63.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := Build(Input{Services: []*v1.Service{svc}, OwnAddressServed: tc.held})
			var got []string
			if len(req.Services) == 1 {
				got = req.Services[0].IPs
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("IPs in the request = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBuildStaged: the addresses the CCM is about to write into a Service
// enter the module's view of a Service that shows none, so its pool is
// written before the Service asks MetalLB for the address; a Service that
// shows its addresses keeps them.
func TestBuildStaged(t *testing.T) {
	ports := []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}
	bare := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "new", UID: "u1"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: ports},
	}
	shown := bare.DeepCopy()
	shown.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.18.0.9"}}
	for _, tc := range []struct {
		name   string
		svc    *v1.Service
		staged func(*v1.Service) []string
		want   []string // the Service's IPs in the request; nil: left out
	}{
		{name: "no hook", svc: bare},
		{name: "nothing staged", svc: bare, staged: func(*v1.Service) []string { return nil }},
		{name: "staged", svc: bare, staged: func(s *v1.Service) []string { return []string{"198.18.0.5"} }, want: []string{"198.18.0.5"}},
		{name: "staged dual-stack, sorted", svc: bare, staged: func(s *v1.Service) []string { return []string{"2001:db8::5", "198.18.0.5"} }, want: []string{"198.18.0.5", "2001:db8::5"}},
		{name: "not an address", svc: bare, staged: func(s *v1.Service) []string { return []string{"nonsense"} }},
		{name: "shown wins", svc: shown, staged: func(s *v1.Service) []string { return []string{"198.18.0.5"} }, want: []string{"198.18.0.9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := Build(Input{Services: []*v1.Service{tc.svc}, Staged: tc.staged})
			var got []string
			if len(req.Services) == 1 {
				got = req.Services[0].IPs
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("IPs in the request = %v, want %v", got, tc.want)
			}
		})
	}
}
