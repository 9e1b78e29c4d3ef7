package deploy_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/policies"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// required are the two values the chart cannot default (its Secret needs them).
func required() map[string]any {
	return map[string]any{"config": map[string]any{"apiKey": "k", "projectID": "p"}}
}

func with(extra string) map[string]any {
	v := required()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(extra), &m); err != nil {
		panic(err)
	}
	for k, x := range m {
		v[k] = x
	}
	return v
}

func loadValues(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func renderChart(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	ch, err := deploycheck.LoadChart(deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploycheck.RenderChart(ch, values, deploy.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

type chartCase struct {
	name   string
	values map[string]any
	// lbEnv is METAL_LOAD_BALANCER of the container ("" for none); lbRole
	// the namespace of the load balancer's Role ("" for none).
	lbEnv, lbRole string
}

func chartCases(t *testing.T) []chartCase {
	return []chartCase{
		{name: "defaults", values: required()},
		{name: "upstream v3.8.1 values", values: loadValues(t, "testdata/upstream-v3.8.1-values.yaml"), lbRole: "metallb-system"},
		{name: "metallb", values: with(`loadBalancer: {mode: metallb}`), lbEnv: "metallb:///metallb-system", lbRole: "metallb-system"},
		{name: "metallb in FRR mode", values: with(`loadBalancer: {mode: metallb, metallb: {bgpType: frr}}`), lbEnv: "metallb:///metallb-system?bgpType=frr", lbRole: "metallb-system"},
		{name: "metallb-legacy", values: with(`loadBalancer: {mode: metallb-legacy}`), lbEnv: "metallb:///metallb-system/config", lbRole: "metallb-system"},
		{name: "legacy from config", values: with(`config: {apiKey: k, projectID: p, loadbalancer: "metallb:///metallb-system/cm"}`), lbRole: "metallb-system"},
		{name: "kube-vip", values: with(`loadBalancer: {mode: kube-vip}`), lbEnv: "kube-vip://"},
		{name: "module by digest", values: with(`
loadBalancer:
  mode: module
  module:
    url: wasm+oci://registry.example/team/bird@sha256:` + strings.Repeat("ab", 32) + `?namespace=default
    pullSecret: registry-creds
    namespace: default
    rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, patch, update, delete]}]
`), lbEnv: "wasm+oci://registry.example/team/bird@sha256:" + strings.Repeat("ab", 32) + "?namespace=default", lbRole: "default"},
		{name: "module from an image volume", values: with(`
loadBalancer:
  mode: module
  module: {url: "wasm:///etc/ccm/modules/mine.wasm", image: {reference: "registry.example/mods:v1"}}
replicaCount: 1
metrics: {enabled: false}
`), lbEnv: "wasm:///etc/ccm/modules/mine.wasm"},
		{name: "metrics served with a certificate of a Secret", values: with(`metrics: {tls: {secretName: ccm-metrics-tls}}`)},
	}
}

// TestChartRenders renders the chart with Helm's own engine for the
// defaults, a values file written for upstream's chart, and each
// load-balancer mode, checks what each mode must produce, and sends every
// object to a real kube-apiserver as a server-side dry run (strict field
// validation: a misspelt field or wrong type fails).
func TestChartRenders(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	for _, tc := range chartCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderChart(t, tc.values)
			d := find(objs, "Deployment", deploy.Namespace, "cloud-provider-equinix-metal")
			if d == nil {
				t.Fatal("no Deployment")
			}
			c := container(t, d)
			if got := envValue(c, "METAL_LOAD_BALANCER"); got != tc.lbEnv {
				t.Errorf("METAL_LOAD_BALANCER = %q, want %q", got, tc.lbEnv)
			}
			var roleNS string
			for _, o := range objs {
				if o.GetKind() == "Role" && strings.HasSuffix(o.GetName(), "-loadbalancer") {
					roleNS = o.GetNamespace()
				}
			}
			if roleNS != tc.lbRole {
				t.Errorf("load-balancer Role in %q, want %q", roleNS, tc.lbRole)
			}
			// The readiness probe asks /readyz, which the CCM serves where
			// its flag says.
			path, _, _ := unstructured.NestedString(c, "readinessProbe", "httpGet", "path")
			port, _, _ := unstructured.NestedFieldNoCopy(c, "readinessProbe", "httpGet", "port")
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			if path != "/readyz" || fmt.Sprint(port) != "10270" || !slices.Contains(args, "--metal-readiness-address=:10270") {
				t.Errorf("readiness probe %s on port %v, args %v; want /readyz on 10270, served by --metal-readiness-address=:10270", path, port, args)
			}
			if img, _ := c["image"].(string); !strings.HasSuffix(img, ":v0.0.0-dev") {
				t.Errorf("image %q does not carry the chart's appVersion", img)
			}
			if _, err := deploycheck.DryRun(ctx, env.Config, objs); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestChartUpstreamValues: what upstream's value names do here.
func TestChartUpstreamValues(t *testing.T) {
	objs := renderChart(t, loadValues(t, "testdata/upstream-v3.8.1-values.yaml"))
	d := find(objs, "Deployment", deploy.Namespace, "cloud-provider-equinix-metal")
	c := container(t, d)
	if img := c["image"]; img != "registry.example/mirror/cloud-provider-equinix-metal:v0.0.0-dev" {
		t.Errorf("image = %v", img)
	}
	args := fmt.Sprint(c["args"])
	for _, want := range []string{"--authentication-skip-lookup=true", "--v=2", "--cloud-config=/etc/cloud-sa/cloud-sa.json"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %s lack %s", args, want)
		}
	}
	if got := envValue(c, "METAL_API_SERVER_PORT"); got != "6443" {
		t.Errorf("env METAL_API_SERVER_PORT = %q", got)
	}
	if find(objs, "ClusterRole", "", "system:cloud-controller-manager") == nil {
		t.Error("clusterRole.name is not the ClusterRole's name")
	}
	file, raw := cloudSAJSON(t, objs)
	if file["projectID"] != "4e1a6b2c-2f8e-4e8a-9c5d-0123456789ab" || file["loadbalancer"] != "metallb:///metallb-system" {
		t.Errorf("cloud-sa.json = %s", raw)
	}
}

// TestChartSchema: a wrong type is refused before rendering, naming the value.
func TestChartSchema(t *testing.T) {
	ch, err := deploycheck.LoadChart(deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ values, want string }{
		{`replicaCount: two`, "replicaCount"},
		{`image: {pullPolicy: Sometimes}`, "pullPolicy"},
		{`loadBalancer: {mode: haproxy}`, "mode"},
		{`loadBalancer: {mode: metallb, metallb: {bgpType: bird}}`, "bgpType"},
		{`loadBalancer: {mode: module, module: {url: "https://example/x.wasm"}}`, "url"},
		{`replicas: 3`, "replicas"},
		{`config: {apiKey: k, projectID: p, orphanEIPs: delete}`, "orphanEIPs"},
		{`config: {apiKey: k, projectID: p, bgpMaxPrefixesAction: drop}`, "bgpMaxPrefixesAction"},
		{`config: {apiKey: k, projectID: p, bgpMaxPrefixes: 0}`, "bgpMaxPrefixes"},
		// A misspelt cloud-sa.json field: the CCM would only warn and run
		// without load balancing.
		{`config: {apiKey: k, projectID: p, loadbalncer: "metallb:///metallb-system"}`, "loadbalncer"},
		{`config: {apiKey: k, projectID: p, loadbalancer: "emlb:///da"}`, "loadbalancer"},
		{`config: {apiKey: k, projectID: p, annotationPeerASNs: "peer-asn"}`, "annotationPeerASNs"},
		{`config: {apiKey: k, projectID: p, annotationPeerASN: "metal.equinix.com/peer-asn"}`, "annotationPeerASN"},
		{`config: {apiKey: k, projectID: p, apiServerPort: 70000}`, "apiServerPort"},
		{`config: {apiKey: k, projectID: p, healthCheckInterval: 2}`, "healthCheckInterval"},
		{`config: {apiKey: k, projectID: p, apiTimeout: 30 seconds}`, "apiTimeout"},
		{`config: {apiKey: k, projectID: p, eipHealthCheckUseHostIP: sometimes}`, "eipHealthCheckUseHostIP"},
		{`metrics: {prometheusRule: {enabled: yes please}}`, "enabled"},
	} {
		_, err := deploycheck.RenderChart(ch, with(tc.values), deploy.Namespace)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: err = %v, want a schema error naming %s", tc.values, err, tc.want)
		}
	}
	_, err = deploycheck.RenderChart(ch, map[string]any{}, deploy.Namespace)
	if err == nil || !strings.Contains(err.Error(), "config.apiKey is required") {
		t.Errorf("without config.apiKey: %v", err)
	}
	// bgpType with a mode that does not take it would be dropped without
	// a word.
	_, err = deploycheck.RenderChart(ch, with(`loadBalancer: {mode: metallb-legacy, metallb: {bgpType: frr}}`), deploy.Namespace)
	if err == nil || !strings.Contains(err.Error(), "bgpType") || !strings.Contains(err.Error(), "mode metallb") {
		t.Errorf("bgpType with mode metallb-legacy: %v, want an error naming bgpType and mode metallb", err)
	}
}

// TestChartOrphanExample: the commented orphan (and BGP prefix) settings in
// values.yaml, uncommented, pass the schema and reach cloud-sa.json as they
// are.
func TestChartOrphanExample(t *testing.T) {
	b, err := os.ReadFile(deploy.ChartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := map[string]any{"apiKey": "k", "projectID": "p"}
	for _, line := range strings.Split(string(b), "\n") {
		for _, key := range []string{"orphanEIPs", "orphanEIPGrace", "bgpMaxPrefixes", "bgpMaxPrefixesAction"} {
			if v, ok := strings.CutPrefix(line, "  # "+key+": "); ok {
				v, _, _ = strings.Cut(v, "#")
				config[key] = strings.TrimSpace(v)
			}
		}
	}
	if len(config) != 6 {
		t.Fatalf("values.yaml's commented example under config: has %v, want orphanEIPs, orphanEIPGrace, bgpMaxPrefixes and bgpMaxPrefixesAction", config)
	}
	objs := renderChart(t, map[string]any{"config": config})
	file, raw := cloudSAJSON(t, objs)
	if file["orphanEIPs"] != "release" || file["orphanEIPGrace"] != config["orphanEIPGrace"] ||
		file["bgpMaxPrefixes"] != "10" || file["bgpMaxPrefixesAction"] != "refuse" {
		t.Errorf("cloud-sa.json = %s", raw)
	}
}

// cloudSAJSON is the cloud-sa.json of the rendered Secret, decoded and raw.
func cloudSAJSON(t *testing.T, objs []*unstructured.Unstructured) (map[string]any, []byte) {
	t.Helper()
	s := find(objs, "Secret", deploy.Namespace, deploy.SecretName)
	if s == nil {
		t.Fatal("no Secret from config")
	}
	enc, _, _ := unstructured.NestedString(s.Object, "data", deploy.SecretKey)
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	return file, raw
}

// TestChartPoliciesMatchPolicies: the chart's copy of the built-in
// policies equals policies/ (make sync-policies writes both).
func TestChartPoliciesMatchPolicies(t *testing.T) {
	cm := find(renderChart(t, required()), "ConfigMap", deploy.Namespace, deploy.PoliciesConfigMap)
	if cm == nil {
		t.Fatal("no policies ConfigMap")
	}
	got, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	entries, err := fs.ReadDir(policies.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".rego") || strings.HasSuffix(e.Name(), "_test.rego") {
			continue
		}
		n++
		want, _ := fs.ReadFile(policies.FS, e.Name())
		if got[e.Name()] != string(want) {
			t.Errorf("chart policy %s differs from policies/: run make sync-policies", e.Name())
		}
	}
	if len(got) != n {
		t.Errorf("chart has %d policies, policies/ %d", len(got), n)
	}
}

// TestChartCheckAllowed installs the chart's RBAC in each load-balancer
// mode and asks the API server the same questions as TestCheckAllowed asks
// of the matching kustomization: the same least-privilege set.
func TestChartCheckAllowed(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	modes := map[string]string{".": "", "overlays/kube-vip": "kube-vip", "overlays/metallb": "metallb", "overlays/metallb-legacy": "metallb-legacy"}
	for _, tc := range rbacCases() {
		t.Run(tc.dir, func(t *testing.T) {
			mode, ok := modes[tc.dir]
			if !ok {
				t.Fatalf("no chart mode for %s", tc.dir)
			}
			rbac := deploycheck.RBACObjects(renderChart(t, with(`loadBalancer: {mode: "`+mode+`"}`)))
			if err := deploycheck.Install(ctx, env.Config, rbac); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { removeLBRoles(t, kube, rbac) })
			denied, err := deploycheck.CheckAllowed(ctx, kube, append(slices.Clone(tc.allowed), tc.denied...))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, c := range tc.denied {
				want = append(want, deploycheck.Denied{Call: c}.String())
			}
			var got []string
			for _, d := range denied {
				got = append(got, stripReason(d.String()))
			}
			for _, g := range got {
				if !slices.Contains(want, g) {
					t.Errorf("denied, but the CCM needs it: %s", g)
				}
			}
			for _, w := range want {
				if !slices.Contains(got, w) {
					t.Errorf("allowed, but must be denied: %s", w)
				}
			}
		})
	}
}

// removeLBRoles deletes the load balancer's Role and RoleBinding, so the
// next mode starts without them (as helm upgrade to another mode would).
func removeLBRoles(t *testing.T, kube kubernetes.Interface, objs []*unstructured.Unstructured) {
	ctx := context.Background()
	for _, o := range objs {
		if !strings.HasSuffix(o.GetName(), "-loadbalancer") {
			continue
		}
		var err error
		switch o.GetKind() {
		case "Role":
			err = kube.RbacV1().Roles(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case "RoleBinding":
			err = kube.RbacV1().RoleBindings(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
		if err != nil {
			t.Errorf("removing %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

func container(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%d containers", len(cs))
	}
	return cs[0].(map[string]any)
}

func envValue(c map[string]any, name string) string {
	env, _ := c["env"].([]any)
	for _, e := range env {
		m := e.(map[string]any)
		if m["name"] == name {
			v, _ := m["value"].(string)
			return v
		}
	}
	return ""
}
