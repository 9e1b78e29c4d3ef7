package wasmhost

import (
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

func TestCheckScopes(t *testing.T) {
	cases := []struct {
		kind sdk.ObjectKind
		err  bool
	}{
		{sdk.ObjectKind{APIVersion: "v1", Kind: "ConfigMap"}, true},
		{sdk.ObjectKind{APIVersion: "v1", Kind: "ConfigMap", Namespace: "lb"}, false},
		{sdk.ObjectKind{APIVersion: "metallb.io/v1beta1", Kind: "IPAddressPool"}, true},
		{sdk.ObjectKind{APIVersion: "metallb.io/v1beta2", Kind: "BGPPeer", Namespace: "metallb-system"}, false},
		{sdk.ObjectKind{APIVersion: "apps/v1", Kind: "Deployment"}, true},
		{sdk.ObjectKind{APIVersion: "v1", Kind: "Namespace"}, false},                             // cluster-scoped
		{sdk.ObjectKind{APIVersion: "example.com/v1", Kind: "Widget"}, false},                    // unknown: the reconciler decides
		{sdk.ObjectKind{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, false}, // cluster-scoped
		{sdk.ObjectKind{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, true},
	}
	for _, tc := range cases {
		err := checkScopes(sdk.Description{Emits: []sdk.ObjectKind{tc.kind}})
		if (err != nil) != tc.err {
			t.Errorf("%+v: err = %v, want error %v", tc.kind, err, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "?namespace=") {
			t.Errorf("%+v: %v does not name the URL option", tc.kind, err)
		}
	}
}
