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
		Emits:           []sdk.ObjectKind{{APIVersion: "metallb.io/v1beta1", Kind: "IPAddressPool", Namespace: "metallb-system"}, {APIVersion: "example.com/v1", Kind: "Cluster"}},
		NodeAnnotations: true}
	req := sdk.GenerateRequest{Nodes: []sdk.Node{{Name: "worker-1"}}, Annotations: sdk.AnnotationTemplates{PeerIP: "metal.equinix.com/bgp-peers-{{n}}-peer-ip"}}
	pool := func(md string) sdk.Object {
		return sdkObj(`{"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool","metadata":` + md + `,"spec":{}}`)
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
