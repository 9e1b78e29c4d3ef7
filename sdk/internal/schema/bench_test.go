package schema

import "testing"

// BenchmarkCheck is the check of one object of each shape the metallb-crd
// module writes most: an IPAddressPool (one per Service) and a BGPPeer
// (two per node).
func BenchmarkCheck(b *testing.B) {
	for _, tc := range []struct{ name, obj string }{
		{"IPAddressPool", `{"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool","metadata":{"annotations":{"metal.equinix.com/services":"ns-0/svc-0001"},` +
			`"labels":{"cloud-provider":"equinix-metal","service-svc-0001":"namespace-ns-0"},"name":"ns-0.svc-0001","namespace":"metallb-system"},` +
			`"spec":{"addresses":["145.40.0.1/32"],"autoAssign":false}}`},
		{"BGPPeer", `{"apiVersion":"metallb.io/v1beta2","kind":"BGPPeer","metadata":{"labels":{"cloud-provider":"equinix-metal"},"name":"node-001-0","namespace":"metallb-system"},` +
			`"spec":{"myASN":65000,"nodeSelectors":[{"matchLabels":{"kubernetes.io/hostname":"node-001"}}],"passwordSecret":{"name":"equinix-metal-bgp-password","namespace":"metallb-system"},` +
			`"peerASN":65530,"peerAddress":"169.254.255.1","peerPort":179,"sourceAddress":"10.66.0.1"}}`},
	} {
		av, kind, o := apiVersionKind(b, tc.obj)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var c Checker
			for b.Loop() {
				if err := c.Check(av, kind, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
