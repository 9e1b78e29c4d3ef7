package deploy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
)

// refusal is values the chart must refuse, and what the message must say
// (the value's name and the fix).
type refusal struct {
	name, values string
	want         []string
}

func checkRefusals(t *testing.T, base func() map[string]any, cases []refusal) {
	t.Helper()
	ch, err := deploycheck.LoadChart(deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		v := base()
		for k, x := range with(tc.values) {
			if k == "config" && v["config"] != nil {
				for ck, cx := range x.(map[string]any) {
					v["config"].(map[string]any)[ck] = cx
				}
				continue
			}
			v[k] = x
		}
		_, err := deploycheck.RenderChart(ch, v, deploy.Namespace)
		if err == nil {
			t.Errorf("%s: rendered, want it refused saying %q", tc.name, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", tc.name, err, w)
			}
		}
	}
}

// TestChartRefusesUpstreamImage: upstream's users pin image.tag (its chart's
// default tag is "main") and often image.repository; `helm get values` of
// their release carries both into `helm upgrade -f`, and this chart would
// run upstream's binary with this CCM's flags and mounts. The chart refuses
// it, naming the value and the fix; an image of this CCM (a mirror of it
// too) renders.
func TestChartRefusesUpstreamImage(t *testing.T) {
	upstream := func() map[string]any { return loadValues(t, "testdata/upstream-v3.8.1-values.yaml") }
	fix := "remove image from your values"
	checkRefusals(t, upstream, []refusal{
		{"upstream's ghcr.io image", `image: {repository: ghcr.io/equinix/cloud-provider-equinix-metal, tag: v3.8.1}`,
			[]string{"image.repository ghcr.io/equinix/cloud-provider-equinix-metal", "upstream", fix}},
		{"upstream's Docker Hub image", `image: {repository: equinix/cloud-provider-equinix-metal, tag: v3.8.1}`,
			[]string{"image.repository equinix/cloud-provider-equinix-metal", fix}},
		{"upstream's repository, no tag", `image: {repository: docker.io/equinix/cloud-provider-equinix-metal}`,
			[]string{"image.repository docker.io/equinix/cloud-provider-equinix-metal", fix}},
		{"upstream's release in a mirror", `image: {repository: registry.example/mirror/cloud-provider-equinix-metal, tag: v3.8.1}`,
			[]string{"image.tag v3.8.1", "upstream", fix}},
		{"upstream's release tag alone", `image: {tag: v3.7.0}`, []string{"image.tag v3.7.0", fix}},
	})
	for _, img := range []string{
		`image: {repository: registry.example/mirror/cloud-provider-equinix-metal, tag: ""}`,
		`image: {repository: registry.example/team/cloud-provider-equinix-metal, tag: v1.2.0}`,
		`image: {tag: v0.3.0-4-gabc1234}`,
	} {
		v := upstream()
		v["image"] = with(img)["image"]
		renderChart(t, v)
	}
}

// lbEnvCount is how many METAL_LOAD_BALANCER entries the container has.
func lbEnvCount(c map[string]any) int {
	n := 0
	env, _ := c["env"].([]any)
	for _, e := range env {
		if e.(map[string]any)["name"] == "METAL_LOAD_BALANCER" {
			n++
		}
	}
	return n
}

// lbRole is the load balancer's Role, or nil.
func lbRole(objs []*unstructured.Unstructured) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == "Role" && strings.HasSuffix(o.GetName(), "-loadbalancer") {
			return o
		}
	}
	return nil
}

// TestChartLoadBalancerSources: the load balancer can be chosen by
// loadBalancer.mode, env.METAL_LOAD_BALANCER (upstream's first documented
// way), config.loadbalancer or --metal-load-balancer in additionalCommands.
// Wherever it comes from it gets its RBAC, the container has at most one
// METAL_LOAD_BALANCER, and two sources that disagree are refused naming
// both (the CCM would silently run the one of higher precedence: flag >
// environment > cloud-sa.json).
func TestChartLoadBalancerSources(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		lbEnv        string // the one METAL_LOAD_BALANCER, "" for none
		roleNS       string // the load balancer's Role, "" for none
		resource     string // a resource the Role grants
	}{
		{"env, CRD mode", `env: {METAL_LOAD_BALANCER: "metallb:///metallb-system?crdConfiguration=true"}`,
			"metallb:///metallb-system?crdConfiguration=true", "metallb-system", "bgppeers"},
		{"env, ConfigMap mode", `env: {METAL_LOAD_BALANCER: "metallb:///lb/config"}`, "metallb:///lb/config", "lb", "configmaps"},
		{"env and mode agree", `{loadBalancer: {mode: metallb}, env: {METAL_LOAD_BALANCER: "metallb:///metallb-system"}}`,
			"metallb:///metallb-system", "metallb-system", "bgppeers"},
		{"env and config agree", `{config: {loadbalancer: "metallb:///metallb-system"}, env: {METAL_LOAD_BALANCER: "metallb:///metallb-system"}}`,
			"metallb:///metallb-system", "metallb-system", "bgppeers"},
		{"mode and config agree", `{loadBalancer: {mode: metallb-legacy}, config: {loadbalancer: "metallb:///metallb-system/config"}}`,
			"metallb:///metallb-system/config", "metallb-system", "configmaps"},
		{"flag", `additionalCommands: ["--metal-load-balancer=metallb:///metallb-system"]`, "", "metallb-system", "bgppeers"},
		{"env kube-vip", `env: {METAL_LOAD_BALANCER: "kube-vip://"}`, "kube-vip://", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := required()
			for k, x := range with(tc.values) {
				if k == "config" {
					x.(map[string]any)["apiKey"], x.(map[string]any)["projectID"] = "k", "p"
				}
				v[k] = x
			}
			objs := renderChart(t, v)
			c := container(t, find(objs, "Deployment", deploy.Namespace, "cloud-provider-equinix-metal"))
			if n := lbEnvCount(c); n > 1 {
				t.Errorf("%d METAL_LOAD_BALANCER entries in the container: %v", n, c["env"])
			}
			if got := envValue(c, "METAL_LOAD_BALANCER"); got != tc.lbEnv {
				t.Errorf("METAL_LOAD_BALANCER = %q, want %q", got, tc.lbEnv)
			}
			role := lbRole(objs)
			switch {
			case tc.roleNS == "" && role != nil:
				t.Errorf("a load-balancer Role in %s, want none", role.GetNamespace())
			case tc.roleNS != "" && role == nil:
				t.Errorf("no load-balancer Role, want one in %s", tc.roleNS)
			case role != nil:
				rules, _ := json.Marshal(role.Object["rules"])
				if role.GetNamespace() != tc.roleNS || !strings.Contains(string(rules), `"`+tc.resource+`"`) {
					t.Errorf("load-balancer Role in %s with rules %s, want %s in %s", role.GetNamespace(), rules, tc.resource, tc.roleNS)
				}
			}
		})
	}

	checkRefusals(t, required, []refusal{
		{"mode and env", `{loadBalancer: {mode: metallb}, env: {METAL_LOAD_BALANCER: "kube-vip://"}}`,
			[]string{"loadBalancer.mode metallb", "metallb:///metallb-system", "env.METAL_LOAD_BALANCER kube-vip://"}},
		{"env and config", `{env: {METAL_LOAD_BALANCER: "kube-vip://"}, config: {loadbalancer: "metallb:///metallb-system"}}`,
			[]string{"env.METAL_LOAD_BALANCER kube-vip://", "config.loadbalancer metallb:///metallb-system"}},
		{"mode and config", `{loadBalancer: {mode: metallb}, config: {loadbalancer: "metallb:///metallb-system/config"}}`,
			[]string{"loadBalancer.mode metallb", "config.loadbalancer metallb:///metallb-system/config"}},
		{"flag and env", `{additionalCommands: ["--metal-load-balancer", "kube-vip://"], env: {METAL_LOAD_BALANCER: "metallb:///metallb-system"}}`,
			[]string{"--metal-load-balancer kube-vip://", "env.METAL_LOAD_BALANCER metallb:///metallb-system"}},
	})
}

// TestChartModuleSettings: what the chart can tell is wrong with a module's
// settings before the CCM starts: a Role namespace that is not where the
// URL's ?namespace= sends the module's objects, a namespace without rules
// (the module's writes would all be denied), and a wasm+oci:// module named
// by tag (the CCM refuses it at start).
func TestChartModuleSettings(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab", 32)
	rules := `rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, patch, update, delete]}]`

	checkRefusals(t, required, []refusal{
		{"namespace contradicts the URL", `loadBalancer: {mode: module, module: {url: "wasm+oci://registry.example/team/bird` + digest + `?namespace=bird", namespace: default, ` + rules + `}}`,
			[]string{"loadBalancer.module.namespace default", "?namespace=bird"}},
		{"namespace without rules", `loadBalancer: {mode: module, module: {url: "wasm:///etc/ccm/modules/bird.wasm", namespace: bird}}`,
			[]string{"loadBalancer.module.rules", "bird"}},
		{"URL namespace without rules", `loadBalancer: {mode: module, module: {url: "wasm+oci://registry.example/team/bird` + digest + `?namespace=bird"}}`,
			[]string{"loadBalancer.module.rules", "bird"}},
		{"tag", `loadBalancer: {mode: module, module: {url: "wasm+oci://registry.example/team/bird:v1?namespace=bird", namespace: bird, ` + rules + `}}`,
			[]string{"loadBalancer.module.url wasm+oci://registry.example/team/bird:v1", "@sha256:", "make module-image"}},
		{"no tag, no digest", `loadBalancer: {mode: module, module: {url: "wasm+oci://registry.example/team/bird"}}`,
			[]string{"loadBalancer.module.url", "@sha256:", "make module-image"}},
		{"URL without mode module", `loadBalancer: {module: {url: "wasm:///etc/ccm/modules/bird.wasm"}}`,
			[]string{"loadBalancer.module.url", "loadBalancer.mode"}},
		{"tag in config.loadbalancer", `config: {loadbalancer: "wasm+oci://registry.example/team/bird:v1"}`,
			[]string{"config.loadbalancer wasm+oci://registry.example/team/bird:v1", "make module-image"}},
	})

	// The URL's ?namespace= is where the objects go: the Role goes there.
	objs := renderChart(t, with(`loadBalancer: {mode: module, module: {url: "wasm+oci://registry.example/team/bird`+digest+`?namespace=bird", `+rules+`}}`))
	if role := lbRole(objs); role == nil || role.GetNamespace() != "bird" {
		t.Errorf("module with ?namespace=bird and rules: Role %v, want one in bird", role)
	}
	// A module that emits nothing namespaced (node annotations only) needs
	// neither namespace nor rules.
	if role := lbRole(renderChart(t, with(`loadBalancer: {mode: module, module: {url: "wasm:///etc/ccm/modules/annotate.wasm"}}`))); role != nil {
		t.Errorf("module without namespace: a Role in %s", role.GetNamespace())
	}
}
