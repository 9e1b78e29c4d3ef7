package wasmhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// BenchmarkValidateOutput10000x1000 validates the metallb-crd module's
// output for 10,000 Services and 1,000 nodes (objects of the shape its
// golden files hold: 10,000 IPAddressPools, 2,000 BGPPeers, the
// BGPAdvertisement listing every pool, the password Secret), decoded as the
// host decodes them. "declaration" is the checks against describe and the
// request alone (what a memoized output gets); "all" adds the checks
// against the schemas and the API server's size limits (what a fresh output
// gets). Compare with BenchmarkGenerateMetalLB10000x1000 in host/lbmodule,
// the whole call at this size.
func BenchmarkValidateOutput10000x1000(b *testing.B) {
	const services, nodes = 10000, 1000
	var buf bytes.Buffer
	buf.WriteString(`{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[`)
	add := func(v any) {
		if buf.Bytes()[buf.Len()-1] != '[' {
			buf.WriteByte(',')
		}
		o, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		buf.Write(o)
	}
	labels := map[string]any{"cloud-provider": "equinix-metal"}
	md := func(name string, extra map[string]any) map[string]any {
		m := map[string]any{"name": name, "namespace": "metallb-system", "labels": labels}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	pools := make([]any, 0, services)
	for i := range services {
		ns, svc := fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("svc-%04d", i)
		name := ns + "." + svc
		pools = append(pools, name)
		add(map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
			"metadata": md(name, map[string]any{
				"annotations": map[string]any{"metal.equinix.com/services": ns + "/" + svc},
				"labels":      map[string]any{"cloud-provider": "equinix-metal", "service-" + svc: "namespace-" + ns},
			}),
			"spec": map[string]any{"addresses": []any{fmt.Sprintf("145.%d.%d.%d/32", 40+i/65536, (i/256)%256, i%256)}, "autoAssign": false}})
	}
	for i := range nodes {
		node := fmt.Sprintf("node-%03d", i)
		for n, ip := range []string{"169.254.255.1", "169.254.255.2"} {
			add(map[string]any{"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
				"metadata": md(fmt.Sprintf("%s-%d", node, n), nil),
				"spec": map[string]any{"myASN": 65000, "peerASN": 65530, "peerAddress": ip, "peerPort": 179,
					"sourceAddress":  fmt.Sprintf("10.%d.%d.%d", 66+i/65536, (i/256)%256, i%256),
					"nodeSelectors":  []any{map[string]any{"matchLabels": map[string]any{"kubernetes.io/hostname": node}}},
					"passwordSecret": map[string]any{"name": "equinix-metal-bgp-password", "namespace": "metallb-system"}}})
		}
	}
	add(map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
		"metadata": md("equinix-metal-bgp-adv", nil), "spec": map[string]any{"ipAddressPools": pools}})
	add(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
		"metadata": md("equinix-metal-bgp-password", nil), "data": map[string]any{"password": "ZmFrZS1iZ3AtcGFzc3dvcmQtZm9yLXRlc3Rz"}})
	buf.WriteString(`]}`)
	resp, err := decodeResponse(buf.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	d := sdk.Description{APIVersion: sdk.APIVersion, Kind: sdk.KindDescribeResponse, Name: "metallb-crd"}
	for _, k := range []struct{ av, kind string }{{"metallb.io/v1beta1", "IPAddressPool"}, {"metallb.io/v1beta2", "BGPPeer"}, {"metallb.io/v1beta1", "BGPAdvertisement"}, {"v1", "Secret"}} {
		d.Emits = append(d.Emits, sdk.ObjectKind{APIVersion: k.av, Kind: k.kind, Namespace: "metallb-system"})
	}
	var req sdk.GenerateRequest
	for _, withSchemas := range []bool{false, true} {
		name := map[bool]string{false: "declaration", true: "all"}[withSchemas]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpuPerOp(b)
			for b.Loop() {
				if err := validateOutput(d, req, resp, withSchemas); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
