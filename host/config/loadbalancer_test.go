package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseLoadBalancer(t *testing.T) {
	cases := []struct {
		in   string
		want LoadBalancer
		err  string
	}{
		{in: "", want: LoadBalancer{Kind: LBNone}},
		{in: "metallb:///", want: LoadBalancer{Kind: LBMetalLBCRD, Namespace: "metallb-system", Options: map[string]string{}}},
		{in: "metallb:///lb", want: LoadBalancer{Kind: LBMetalLBCRD, Namespace: "lb", Options: map[string]string{}}},
		{in: "metallb:///lb?crdConfiguration=true", want: LoadBalancer{Kind: LBMetalLBCRD, Namespace: "lb", Options: map[string]string{}}},
		{in: "metallb:///lb?crdConfiguration=false", want: LoadBalancer{Kind: LBMetalLBConfigMap, Namespace: "lb", ConfigMap: "config", Options: map[string]string{}}},
		{in: "metallb:///?crdConfiguration=false", want: LoadBalancer{Kind: LBMetalLBConfigMap, Namespace: "metallb-system", ConfigMap: "config", Options: map[string]string{}}},
		{in: "metallb:///foo/myconfig", want: LoadBalancer{Kind: LBMetalLBConfigMap, Namespace: "foo", ConfigMap: "myconfig", Options: map[string]string{}}},
		{in: "metallb:///foo/myconfig?crdConfiguration=false", want: LoadBalancer{Kind: LBMetalLBConfigMap, Namespace: "foo", ConfigMap: "myconfig", Options: map[string]string{}}},
		// Upstream runs this in CRD mode and ignores the ConfigMap name.
		{in: "metallb:///foo/cm?crdConfiguration=true", want: LoadBalancer{Kind: LBMetalLBCRD, Namespace: "foo", Options: map[string]string{}}},
		{in: "metallb:///?crdConfiguration=true", want: LoadBalancer{Kind: LBMetalLBCRD, Namespace: "metallb-system", Options: map[string]string{}}},
		{in: "metallb:///metallb-system/config", want: LoadBalancer{Kind: LBMetalLBConfigMap, Namespace: "metallb-system", ConfigMap: "config", Options: map[string]string{}}},
		{in: "metallb:///metallb-system", want: LoadBalancer{Kind: LBMetalLBCRD, Namespace: "metallb-system", Options: map[string]string{}}},
		{in: "metallb:///lb?crdConfiguration=true&community=65000:1", want: LoadBalancer{Kind: LBMetalLBCRD, Namespace: "lb", Options: map[string]string{"community": "65000:1"}}},
		{in: "metallb:///lb?bgpType=frr", want: LoadBalancer{Kind: LBMetalLBCRD, Namespace: "lb", Options: map[string]string{"bgpType": "frr"}}},
		{in: "kube-vip://", want: LoadBalancer{Kind: LBKubeVIP, Options: map[string]string{}}},
		{in: "empty://", want: LoadBalancer{Kind: LBEmpty, Options: map[string]string{}}},
		{in: "wasm:///etc/ccm/modules/mine.wasm?asn=1", want: LoadBalancer{Kind: LBWasm, Path: "/etc/ccm/modules/mine.wasm", Options: map[string]string{"asn": "1"}}},
		{in: "wasm:///m.wasm?sha256=" + strings.Repeat("AB", 32), want: LoadBalancer{Kind: LBWasm, Path: "/m.wasm", SHA256: strings.Repeat("ab", 32), Options: map[string]string{}}},
		{in: "wasm+oci://registry.example:5000/team/bird@sha256:" + strings.Repeat("AB", 32) + "?namespace=bird", want: LoadBalancer{Kind: LBWasm, OCIRef: "registry.example:5000/team/bird@sha256:" + strings.Repeat("ab", 32), Options: map[string]string{"namespace": "bird"}}},

		{in: "wasm+oci://registry.example:5000/team/bird:v1", err: "is not pinned by digest; a tag can change under the CCM, so name the module by digest: wasm+oci://registry.example:5000/team/bird@sha256:<digest>"},
		{in: "wasm+oci://registry.example/team/bird@sha256:abc", err: "64 hexadecimal digits"},
		{in: "wasm+oci://registry.example/team/bird@sha256:" + strings.Repeat("ab", 32) + "?sha256=" + strings.Repeat("ab", 32), err: "drop sha256="},
		{in: "wasm+oci:///team/bird@sha256:" + strings.Repeat("ab", 32), err: "does not name a registry and repository"},
		{in: "metallb:///a/b/c", err: "too many path segments"},
		{in: "metallb:///foo?crdConfiguration=maybe", err: `crdConfiguration="maybe"`},
		{in: "metallb:///Bad_NS", err: "not a valid namespace name"},
		{in: "metallb:///lb?bgpType=FRR", err: `has bgpType="FRR"; use native (MetalLB's default), frr or frr-k8s`},
		{in: "metallb:///ns/Bad_CM", err: "not a valid object name"},
		{in: "metallb://metallb-system", err: "three slashes"},
		{in: "metallb:///ns?a=1&a=2", err: "repeats the query parameter"},
		{in: "wasm://etc/x.wasm", err: "three slashes"},
		{in: "wasm:///etc/x", err: "does not name a .wasm file"},
		{in: "wasm:///x.wasm?sha256=abc", err: "not 64 hexadecimal digits"},
		{in: "kubevip://", err: `unknown type "kubevip"`},
		{in: "metallb", err: "has no type"},
		{in: "emlb:///da", err: "does not support"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLoadBalancer(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestIPv6Unsupported: MetalLB announces IPv6 in its FRR modes only; the
// ConfigMap and kube-vip integrations never; a user's module may.
func TestIPv6Unsupported(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"metallb:///lb", "MetalLB in native BGP mode (the loadbalancer setting has no bgpType=frr) announces IPv4 only; run MetalLB in FRR mode (v0.16.1 or later) and set the loadbalancer to metallb:///lb?bgpType=frr"},
		{"metallb:///lb?bgpType=native", "MetalLB in native BGP mode"},
		{"metallb:///lb?bgpType=frr", ""},
		{"metallb:///lb?bgpType=frr-k8s", ""},
		{"metallb:///lb/config", "MetalLB <= 0.12 (the ConfigMap mode) announces IPv4 only"},
		{"kube-vip://", "the kube-vip integration gets IPv4 BGP peers only"},
		{"empty://", ""},
		{"wasm:///m.wasm", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			lb, err := ParseLoadBalancer(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := lb.IPv6Unsupported()
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestModeChoice: the start-up line names the mode, why, and the URL of
// the other mode, for every MetalLB form of both upstream READMEs.
func TestModeChoice(t *testing.T) {
	cases := []struct{ in, want, other string }{
		{"metallb:///", "custom resources in namespace metallb-system: the URL names no ConfigMap", "metallb:///metallb-system/config"},
		{"metallb:///metallb-system", "custom resources in namespace metallb-system: the URL names no ConfigMap", "metallb:///metallb-system?crdConfiguration=false"},
		{"metallb:///foonamespace", "custom resources in namespace foonamespace", "metallb:///foonamespace/config"},
		{"metallb:///metallb-system?crdConfiguration=true", "because of crdConfiguration=true", "metallb:///metallb-system/config"},
		{"metallb:///?crdConfiguration=true", "custom resources in namespace metallb-system, because of crdConfiguration=true", "metallb:///metallb-system/config"},
		{"metallb:///foonamespace?crdConfiguration=true", "namespace foonamespace, because of crdConfiguration=true", "metallb:///foonamespace/config"},
		{"metallb:///metallb-system/config?crdConfiguration=true", `the ConfigMap name "config" in the URL is ignored`, "metallb:///metallb-system/config"},
		{"metallb:///metallb-system/config", "ConfigMap metallb-system/config, because the URL names it", "metallb:///metallb-system?crdConfiguration=true"},
		{"metallb:///foonamespace/myconfig", "ConfigMap foonamespace/myconfig", "metallb:///foonamespace?crdConfiguration=true"},
		{"metallb:///?crdConfiguration=false", "ConfigMap metallb-system/config, because of crdConfiguration=false", "metallb:///metallb-system?crdConfiguration=true"},
		{"metallb:///metallb-system/config?crdConfiguration=false", "because of crdConfiguration=false", "metallb:///metallb-system?crdConfiguration=true"},
		{"kube-vip://", "", ""},
		{"metallb://bad", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got := ModeChoice(tc.in)
			if !strings.Contains(got, tc.want) || !strings.Contains(got, tc.other) || (tc.want == "") != (got == "") {
				t.Fatalf("ModeChoice(%q) = %q, want it to contain %q and %q", tc.in, got, tc.want, tc.other)
			}
		})
	}
}

// FuzzParseLoadBalancer: never panics, and the canonical String() form of
// anything accepted parses back to the same value.
func FuzzParseLoadBalancer(f *testing.F) {
	for _, s := range []string{"", "metallb:///", "metallb:///ns/cm", "metallb:///ns?crdConfiguration=false&x=y", "kube-vip://", "empty://?a=b", "wasm:///a/b.wasm?sha256=" + strings.Repeat("0", 64), "metallb://x", "%",
		"wasm+oci://registry.example/team/module@sha256:" + strings.Repeat("ab", 32) + "?namespace=bird", "wasm+oci://registry.example/team/module:v1",
		"metallb://x/%0A", "wasm:///a/%0D.wasm"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lb, err := ParseLoadBalancer(in)
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("%q: the error spans lines: %q", in, err)
		}
		if err != nil || lb.Kind == LBNone {
			return
		}
		again, err := ParseLoadBalancer(lb.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", lb.String(), in, err)
		}
		if lb.SHA256 != "" { // String() leaves the pin out on purpose
			again.SHA256 = lb.SHA256
		}
		if !reflect.DeepEqual(lb, again) {
			t.Fatalf("%q -> %#v -> %q -> %#v", in, lb, lb.String(), again)
		}
	})
}
