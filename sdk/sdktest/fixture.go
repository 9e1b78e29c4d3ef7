package sdktest

import (
	"fmt"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Snapshot is a synthetic, deterministic cluster of services Services (one
// address each, in 10 namespaces) and nodes BGP nodes (two peers each, a
// clearly fake password), with the default annotation templates; for
// benchmarks and scale tests.
func Snapshot(services, nodes int) sdk.GenerateRequest {
	req := sdk.GenerateRequest{Annotations: sdk.AnnotationTemplates{
		LocalASN: "metal.equinix.com/bgp-peers-{{n}}-node-asn",
		PeerASN:  "metal.equinix.com/bgp-peers-{{n}}-peer-asn",
		PeerIP:   "metal.equinix.com/bgp-peers-{{n}}-peer-ip",
		SrcIP:    "metal.equinix.com/bgp-peers-{{n}}-src-ip",
		BGPPass:  "metal.equinix.com/bgp-peers-{{n}}-bgp-pass",
	}}
	for i := range services {
		req.Services = append(req.Services, sdk.Service{
			Namespace: fmt.Sprintf("ns-%d", i%10),
			Name:      fmt.Sprintf("svc-%04d", i),
			UID:       fmt.Sprintf("00000000-0000-0000-0000-%012d", i),
			IPs:       []string{fmt.Sprintf("145.%d.%d.%d", 40+i/65536, (i/256)%256, i%256)},
			Ports:     []sdk.Port{{Name: "https", Protocol: "TCP", Port: 443}},
		})
	}
	for i := range nodes {
		req.Nodes = append(req.Nodes, sdk.Node{
			Name:     fmt.Sprintf("node-%03d", i),
			Labels:   map[string]string{"kubernetes.io/hostname": fmt.Sprintf("node-%03d", i)},
			LocalASN: 65000,
			SourceIP: fmt.Sprintf("10.%d.%d.%d", 66+i/65536, (i/256)%256, i%256),
			Peers: []sdk.Peer{
				{ASN: 65530, IP: "169.254.255.1", Password: "fake-bgp-password-for-tests"},
				{ASN: 65530, IP: "169.254.255.2", Password: "fake-bgp-password-for-tests"},
			},
		})
	}
	return req
}
