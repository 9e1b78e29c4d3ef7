package provider

import (
	"encoding/json"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func lbService(ns, name string, ips ...string) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func TestBuildRequest(t *testing.T) {
	class := "other.io/lb"
	shared := lbService("b", "dns-udp", "147.75.0.9")
	shared.Annotations = map[string]string{"metallb.universe.tf/allow-shared-ip": "dns"}
	other := lbService("a", "classy", "147.75.0.8")
	other.Spec.LoadBalancerClass = &class
	clusterIP := lbService("a", "plain", "147.75.0.7")
	clusterIP.Spec.Type = v1.ServiceTypeClusterIP

	services := []*v1.Service{
		lbService("z", "web", "147.75.0.2", "147.75.0.1", "147.75.0.1"),
		shared,
		lbService("a", "pending"), // no address yet
		other, clusterIP,
		lbService("kube-system", "cloud-provider-equinix-metal-kubernetes-external", "147.75.0.100"),
	}
	nodes := []bgp.Node{
		{Name: "w2", LocalASN: 65000, SourceIP: "10.0.0.2", Peers: []bgp.Peer{{ASN: 65530, IP: "169.254.255.1", Password: "pw"}}},
		{Name: "w1", LocalASN: 65000, SourceIP: "10.0.0.1"},
	}
	tmpl := bgp.Templates{LocalASN: config.DefaultAnnotationLocalASN, PeerASN: config.DefaultAnnotationPeerASN, PeerIP: config.DefaultAnnotationPeerIP, SrcIP: config.DefaultAnnotationSrcIP, BGPPass: config.DefaultAnnotationBGPPass}
	opts := moduleOptions(config.LoadBalancer{Kind: config.LBMetalLBCRD, Namespace: "metallb-system", Options: map[string]string{"x": "y"}})

	got := buildRequest(opts, services, nodes, tmpl)
	if len(got.Services) != 2 || got.Services[0].Name != "dns-udp" || got.Services[1].Name != "web" {
		t.Fatalf("services %+v", got.Services)
	}
	if !reflect.DeepEqual(got.Services[1].IPs, []string{"147.75.0.1", "147.75.0.2"}) {
		t.Fatalf("ips %v", got.Services[1].IPs)
	}
	if got.Services[0].SharingKey != "dns" || got.Services[1].Ports[0] != (sdk.Port{Name: "http", Protocol: "TCP", Port: 80}) {
		t.Fatalf("service details %+v", got.Services)
	}
	if len(got.Nodes) != 2 || got.Nodes[0].Name != "w1" || string(got.Nodes[1].Peers[0].Password) != "pw" {
		t.Fatalf("nodes %+v", got.Nodes)
	}
	if got.Options.Namespace != "metallb-system" || got.Options.Params["x"] != "y" || got.Annotations.PeerIP != config.DefaultAnnotationPeerIP {
		t.Fatalf("options/templates %+v %+v", got.Options, got.Annotations)
	}

	// Same cluster, any order: byte-identical request.
	rev := append([]*v1.Service(nil), services...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(buildRequest(opts, rev, []bgp.Node{nodes[1], nodes[0]}, tmpl))
	if string(a) != string(b) {
		t.Fatalf("request depends on input order:\n%s\n%s", a, b)
	}
}
