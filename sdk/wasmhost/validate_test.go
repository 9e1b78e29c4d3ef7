package wasmhost_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

func TestValidateOutput(t *testing.T) {
	desc := sdk.Description{APIVersion: sdk.APIVersion, Kind: sdk.KindDescribeResponse, Name: "m",
		Emits: []sdk.ObjectKind{{APIVersion: "metallb.io/v1beta1", Kind: "IPAddressPool", Namespace: "metallb-system"}, {APIVersion: "example.com/v1", Kind: "Cluster"},
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: "lb"}, {APIVersion: "metallb.io/v1beta2", Kind: "BGPPeer", Namespace: "metallb-system"}},
		NodeAnnotations: true}
	req := sdk.GenerateRequest{Nodes: []sdk.Node{{Name: "worker-1"}}, Annotations: sdk.AnnotationTemplates{PeerIP: "metal.equinix.com/bgp-peers-{{n}}-peer-ip"}}
	pool := func(md string) sdk.Object {
		return sdkObj(`{"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool","metadata":` + md + `,"spec":{"addresses":["192.0.2.1/32"]}}`)
	}
	cm := func(rest string) sdk.Object {
		return sdkObj(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"foo","namespace":"lb"}` + rest + `}`)
	}
	withSpec := func(av, kind, spec string) sdk.Object {
		return sdkObj(`{"apiVersion":"` + av + `","kind":"` + kind + `","metadata":{"name":"x","namespace":"metallb-system"},"spec":` + spec + `}`)
	}
	for _, tc := range []struct {
		name      string
		objects   []sdk.Object
		ann       map[string]map[string]string
		msg       string
		forbidden bool
	}{
		{"valid", []sdk.Object{pool(`{"name":"a.b","namespace":"metallb-system","labels":{"x":"y"}}`), sdkObj(`{"apiVersion":"example.com/v1","kind":"Cluster","metadata":{"name":"c"}}`)},
			map[string]map[string]string{"worker-1": {"example.com/x": "1"}}, "", false},
		{"bad name", []sdk.Object{pool(`{"name":"A_B","namespace":"metallb-system"}`)}, nil, `IPAddressPool "A_B", whose name is invalid`, false},
		{"no metadata", []sdk.Object{sdkObj(`{"apiVersion":"v1","kind":"IPAddressPool"}`)}, nil, "without metadata", false},
		{"undeclared kind", []sdk.Object{sdkObj(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"metallb-system"}}`)}, nil, "a kind it did not declare", true},
		{"other namespace", []sdk.Object{pool(`{"name":"a","namespace":"kube-system"}`)}, nil, `outside its declared namespace "metallb-system"`, true},
		{"namespace missing", []sdk.Object{pool(`{"name":"a"}`)}, nil, "outside its declared namespace", true},
		{"cluster-scoped with namespace", []sdk.Object{sdkObj(`{"apiVersion":"example.com/v1","kind":"Cluster","metadata":{"name":"c","namespace":"x"}}`)}, nil, "declared Cluster cluster-scoped", true},
		{"uid in metadata", []sdk.Object{pool(`{"name":"a","namespace":"metallb-system","uid":"1"}`)}, nil, "metadata.uid", false},
		{"status", []sdk.Object{sdkObj(`{"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool","metadata":{"name":"a","namespace":"metallb-system"},"status":{}}`)}, nil, "with a status", false},
		{"bad label value", []sdk.Object{pool(`{"name":"a","namespace":"metallb-system","labels":{"x":"not valid!"}}`)}, nil, "invalid labels", false},
		{"ownership label", []sdk.Object{pool(`{"name":"a","namespace":"metallb-system","labels":{"lb.metal.equinix.com/owned-by":"x"}}`)}, nil, "which only the host sets", true},
		{"duplicate", []sdk.Object{pool(`{"name":"a","namespace":"metallb-system"}`), pool(`{"name":"a","namespace":"metallb-system"}`)}, nil, "twice", false},
		{"annotation on unknown node", nil, map[string]map[string]string{"other": {"example.com/x": "1"}}, `node "other", which is not a BGP node`, true},
		{"core annotation", nil, map[string]map[string]string{"worker-1": {"metal.equinix.com/bgp-peers-3-peer-ip": "1"}}, "which the CCM core writes", true},
		{"bad annotation key", nil, map[string]map[string]string{"worker-1": {"bad key": "1"}}, "not a valid name", false},
		// What the API server would refuse (sdk/internal/schema has the
		// cases in detail).
		{"configmap", []sdk.Object{cm(`,"data":{"ip":"192.0.2.1"}`)}, nil, "", false},
		{"number in configmap data", []sdk.Object{cm(`,"data":{"ip":5}`)}, nil, "returned ConfigMap lb/foo: data.ip: must be a string, got number; the API server would refuse it", false},
		{"configmap unknown field", []sdk.Object{cm(`,"spec":{}`)}, nil, "returned ConfigMap lb/foo: spec: unknown field", false},
		{"configmap over 1 MiB", []sdk.Object{cm(`,"data":{"a":"` + strings.Repeat("x", 1<<20) + `","b":"x"}`)}, nil, "returned ConfigMap lb/foo: data and binaryData total 1048577 bytes, over the API server's limit of 1048576 (1 MiB)", false},
		{"annotations over 256 KiB", []sdk.Object{pool(`{"name":"a","namespace":"metallb-system","annotations":{"example.com/a":"` + strings.Repeat("x", 256<<10) + `"}}`)}, nil, "returned IPAddressPool metallb-system/a: metadata.annotations: total 262157 bytes of keys and values, over the API server's limit of 262144 (256 KiB)", false},
		{"pool addresses a string", []sdk.Object{withSpec("metallb.io/v1beta1", "IPAddressPool", `{"addresses":"192.0.2.1/32"}`)}, nil, "returned IPAddressPool metallb-system/x: spec.addresses: must be an array, got string", false},
		{"peer without myASN", []sdk.Object{withSpec("metallb.io/v1beta2", "BGPPeer", `{"peerASN":65530,"peerAddress":"169.254.255.1"}`)}, nil, "returned BGPPeer metallb-system/x: spec.myASN: required, but missing", false},
		{"unknown kind over etcd's limit", []sdk.Object{sdkObj(`{"apiVersion":"example.com/v1","kind":"Cluster","metadata":{"name":"c"},"spec":"` + strings.Repeat("x", 3<<19) + `"}`)}, nil, "returned Cluster c: is at least 1572946 bytes as JSON, over etcd's default request limit of 1572864 bytes (1.5 MiB)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := sdk.GenerateResponse{APIVersion: sdk.APIVersion, Kind: sdk.KindGenerateResponse, Objects: tc.objects, NodeAnnotations: tc.ann}
			err := wasmhost.ValidateOutput(desc, req, resp)
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ve *wasmhost.ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.msg) || ve.Forbidden != tc.forbidden {
				t.Fatalf("got %v (forbidden %v), want %q (forbidden %v)", err, ve != nil && ve.Forbidden, tc.msg, tc.forbidden)
			}
		})
	}
	t.Run("node annotations not declared", func(t *testing.T) {
		d := desc
		d.NodeAnnotations = false
		err := wasmhost.ValidateOutput(d, req, sdk.GenerateResponse{APIVersion: sdk.APIVersion, Kind: sdk.KindGenerateResponse,
			NodeAnnotations: map[string]map[string]string{"worker-1": {"example.com/x": "1"}}})
		if err == nil || !strings.Contains(err.Error(), "without declaring nodeAnnotations") {
			t.Fatalf("got %v", err)
		}
	})
}

func sdkObj(s string) sdk.Object {
	var o sdk.Object
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		panic(err)
	}
	return o
}
