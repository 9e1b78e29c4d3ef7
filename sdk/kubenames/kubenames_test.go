package kubenames_test

import (
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/kubenames"
)

// The rules themselves; that they agree with apimachinery is tested in the
// CCM's module (host/lbmodule/kubenames_test.go), which may import it.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check func(string) error
		ok    []string
		bad   []string
	}{
		{"DNS1123Label", kubenames.ValidateDNS1123Label,
			[]string{"a", "metallb-system", "1a", strings.Repeat("a", 63)},
			[]string{"", "A", "a.b", "-a", "a-", "a_b", strings.Repeat("a", 64)}},
		{"DNS1123Subdomain", kubenames.ValidateDNS1123Subdomain,
			[]string{"a", "a.b", "default.svc-1", strings.Repeat("a", 63) + "." + strings.Repeat("b", 63)},
			[]string{"", "A_B", "a..b", ".a", "a.", strings.Repeat("a", 254)}},
		{"QualifiedName", kubenames.ValidateQualifiedName,
			[]string{"a", "A_b.c", "example.com/X", "metal.equinix.com/bgp-peers-0-peer-ip"},
			[]string{"", "/a", "a/", "a/b/c", "Example.com/a", "bad key", "-a", strings.Repeat("a", 64)}},
		{"LabelValue", kubenames.ValidateLabelValue,
			[]string{"", "a", "A-b_c.d", strings.Repeat("a", 63)},
			[]string{"-a", "a-", "not valid!", strings.Repeat("a", 64)}},
		{"Selector", kubenames.ValidateSelector,
			[]string{"", "a", "!a", "a=b,c!=d", "a==b", "a=", "x in (a,,b)", "x notin ()", "in in (in)", "a>1", "example.com/a in (b)"},
			[]string{",", "a,", "a b", "a in b", "a in (b", "a>b", "!a=b", "a=b=c", "a=-b", "A_/b"}},
	} {
		for _, s := range tc.ok {
			if err := tc.check(s); err != nil {
				t.Errorf("%s(%q) = %v, want valid", tc.name, s, err)
			}
		}
		for _, s := range tc.bad {
			err := tc.check(s)
			if err == nil {
				t.Errorf("%s(%q) is valid, want an error", tc.name, s)
			} else if strings.Contains(err.Error(), "\n") {
				t.Errorf("%s(%q): error is not one line: %q", tc.name, s, err)
			}
		}
	}
}

// TestValidateObjectName: each kind's name rule, as the API server has it
// (host/lbmodule's corpus test sends the same names to kube-apiserver).
func TestValidateObjectName(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind, name string
		ok                     bool
	}{
		{"v1", "ConfigMap", "config.yaml", true},
		{"v1", "ConfigMap", "Not_A_Name", false},
		{"v1", "Service", "1lb", true},
		{"v1", "Service", "lb.web", false},
		{"v1", "Namespace", "metallb-system", true},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "system:metallb:speaker", true},
		{"rbac.authorization.k8s.io/v1", "Role", "Not_A_Name", true},
		{"rbac.authorization.k8s.io/v1", "RoleBinding", "a/b", false},
		{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "..", false},
		{"policy/v1", "PodDisruptionBudget", "Speaker%", false},
		{"policy/v1", "PodDisruptionBudget", "Speaker", true},
		{"metallb.io/v1beta1", "IPAddressPool", "default.web", true},
		{"metallb.io/v1beta1", "IPAddressPool", "Default", false},
	} {
		if err := kubenames.ValidateObjectName(tc.apiVersion, tc.kind, tc.name); (err == nil) != tc.ok {
			t.Errorf("%s %s %q: %v, want ok %v", tc.apiVersion, tc.kind, tc.name, err, tc.ok)
		}
	}
}
