package lbmodule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// TestValidatorAgreesWithAPIServer sends the same objects to the SDK's
// validator (what sdktest and the CCM check before an apply) and to a
// real kube-apiserver with MetalLB's CRDs, as the CCM applies them
// (server-side apply, fieldValidation=Strict) with dryRun=All: the
// built-in modules' golden outputs, and near-misses made from each (every
// leaf of another type, every spec field left out, a name too long, a
// name that is not a DNS name, an unknown field). "sdktest passed" must
// mean "the apply will not be refused", and the reverse. It prints the
// agreement table and fails on any disagreement.
func TestValidatorAgreesWithAPIServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	corpus := append(goldenObjects(t), builtinObjects(t)...)
	// Every namespace the outputs name exists, as in a cluster they are
	// applied to: a missing one is not the validator's business.
	for _, o := range corpus {
		if ns, _ := objMeta(o)["namespace"].(string); ns != "" {
			_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	var cases []corpusCase
	for _, o := range corpus {
		cases = append(cases, corpusCase{"golden", o})
		cases = append(cases, nearMisses(o)...)
	}
	type tally struct{ objects, agreed, bothAccept, bothRefuse int }
	byKind := map[string]*tally{}
	var disagreements []string
	for _, cs := range cases {
		kind := cs.obj["kind"].(string)
		if byKind[kind] == nil {
			byKind[kind] = &tally{}
		}
		tl := byKind[kind]
		tl.objects++
		vErr := validate(cs.obj)
		aErr := applyDryRun(ctx, c, cs.obj)
		switch {
		case vErr == nil && aErr == nil:
			tl.agreed++
			tl.bothAccept++
		case vErr != nil && aErr != nil:
			tl.agreed++
			tl.bothRefuse++
		default:
			disagreements = append(disagreements, fmt.Sprintf("%s %s (%s): validator %v; API server %v", kind, name(cs.obj), cs.what, verdict(vErr), verdict(aErr)))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s %8s %8s %12s %12s %11s\n", "kind", "objects", "agreed", "both accept", "both refuse", "disagreed")
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	total := tallyTotal{}
	for _, k := range kinds {
		tl := byKind[k]
		fmt.Fprintf(&b, "%-18s %8d %8d %12d %12d %11d\n", k, tl.objects, tl.agreed, tl.bothAccept, tl.bothRefuse, tl.objects-tl.agreed)
		total.objects += tl.objects
		total.agreed += tl.agreed
	}
	fmt.Fprintf(&b, "%-18s %8d %8d %12s %12s %11d\n", "all", total.objects, total.agreed, "", "", total.objects-total.agreed)
	t.Log("validator vs kube-apiserver (dryRun=All, fieldValidation=Strict):\n" + b.String())
	for _, d := range disagreements {
		t.Error(d)
	}
}

type tallyTotal struct{ objects, agreed int }

type corpusCase struct {
	what string
	obj  sdk.Object
}

// goldenObjects are the objects of every built-in module's golden outputs.
func goldenObjects(t *testing.T) []sdk.Object {
	t.Helper()
	files, err := filepath.Glob("../../modules/*/testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden outputs (%v)", err)
	}
	seen := map[string]bool{}
	var out []sdk.Object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Objects []sdk.Object `json:"objects"`
		}
		if err := json.Unmarshal(b, &resp); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range resp.Objects {
			key, _ := json.Marshal(o)
			if !seen[string(key)] {
				seen[string(key)] = true
				out = append(out, o)
			}
		}
	}
	return out
}

// builtinObjects are valid objects of built-in kinds other than ConfigMap
// and Secret, the kinds a module might write beside its load balancer's
// own (testdata/corpus-builtin.json, written for this test: no built-in
// module writes them).
func builtinObjects(t *testing.T) []sdk.Object {
	t.Helper()
	b, err := os.ReadFile("testdata/corpus-builtin.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []sdk.Object
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// nearMisses are objects one mistake away from o.
func nearMisses(o sdk.Object) []corpusCase {
	var out []corpusCase
	add := func(what string, change func(sdk.Object)) {
		c := deepCopy(o)
		change(c)
		out = append(out, corpusCase{what, c})
	}
	add("name too long", func(c sdk.Object) { objMeta(c)["name"] = strings.Repeat("a", 254) })
	add("name not a DNS name", func(c sdk.Object) { objMeta(c)["name"] = "Not_A_Name" })
	add("unknown top-level field", func(c sdk.Object) { c["bogus"] = "x" })
	for _, top := range sortedKeys(o) {
		switch top {
		case "apiVersion", "kind", "metadata":
			continue
		}
		body, ok := o[top].(map[string]any)
		if !ok {
			// A list or a value at the top (a Role's rules, an
			// EndpointSlice's addressType).
			add(top+" left out", func(c sdk.Object) { delete(c, top) })
			for _, p := range leaves(o[top], top) {
				add(p.path+" of another type", func(c sdk.Object) { setPath(c, p.keys, otherType(p.value)) })
			}
			continue
		}
		add("unknown "+top+" field", func(c sdk.Object) { c[top].(map[string]any)["bogusField"] = "x" })
		for _, field := range sortedKeys(body) {
			add(top+"."+field+" left out", func(c sdk.Object) { delete(c[top].(map[string]any), field) })
		}
		for _, p := range leaves(body, top) {
			add(p.path+" of another type", func(c sdk.Object) { setPath(c, p.keys, otherType(p.value)) })
		}
	}
	// Each side of every CEL rule (x-kubernetes-validations) of the
	// object's CRD.
	for _, cc := range celNearMisses[o["apiVersion"].(string)+"/"+o["kind"].(string)] {
		add(cc.what, func(c sdk.Object) {
			spec, _ := c["spec"].(map[string]any)
			for k, v := range cc.spec {
				spec[k] = v
			}
		})
	}
	for _, b := range builtinNearMisses[o["apiVersion"].(string)+"/"+o["kind"].(string)] {
		add(b.what, b.change)
	}
	return out
}

// builtinNearMisses try, in the hand-written built-in objects, what their
// kinds' schemas and rules add to the near-misses above: times, quantities,
// an integer's range, duplicates in a list of type map, and each kind's
// name rule.
var builtinNearMisses = map[string][]struct {
	what   string
	change func(sdk.Object)
}{
	"coordination.k8s.io/v1/Lease": {
		{"renewTime without microseconds", func(c sdk.Object) { c["spec"].(map[string]any)["renewTime"] = "2026-11-29T10:00:00Z" }},
		{"renewTime not a time", func(c sdk.Object) { c["spec"].(map[string]any)["renewTime"] = "yesterday" }},
		{"acquireTime with microseconds", func(c sdk.Object) { c["spec"].(map[string]any)["acquireTime"] = "2026-11-29T09:00:00.123456Z" }},
		{"leaseDurationSeconds over int32", func(c sdk.Object) { c["spec"].(map[string]any)["leaseDurationSeconds"] = int64(2147483648) }},
	},
	"apps/v1/DaemonSet": {
		{"memory limit not a quantity", func(c sdk.Object) {
			container(c)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "lots"
		}},
		{"memory limit 1.5Gi", func(c sdk.Object) {
			container(c)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "1.5Gi"
		}},
		{"memory limit 2e9", func(c sdk.Object) {
			container(c)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "2e9"
		}},
		{"two containers of one name", func(c sdk.Object) {
			ps := c["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			ps["containers"] = append(ps["containers"].([]any), map[string]any(deepCopy(container(c))))
		}},
		{"two ports of one number and protocol", func(c sdk.Object) {
			cn := container(c)
			cn["ports"] = append(cn["ports"].([]any), map[string]any{"name": "other", "containerPort": float64(7472), "protocol": "TCP"})
		}},
		{"maxUnavailable 10 without %", func(c sdk.Object) {
			c["spec"].(map[string]any)["updateStrategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "10"}}
		}},
	},
	"apps/v1/Deployment": {
		{"replicas over int32", func(c sdk.Object) { c["spec"].(map[string]any)["replicas"] = int64(2147483648) }},
		{"replicas int32's maximum", func(c sdk.Object) { c["spec"].(map[string]any)["replicas"] = int64(2147483647) }},
		{"selector not the template's labels", func(c sdk.Object) {
			c["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "other"}}
		}},
	},
	"v1/Service": {
		{"two ports of one number and protocol", func(c sdk.Object) {
			sp := c["spec"].(map[string]any)
			sp["ports"] = append(sp["ports"].([]any), map[string]any{"name": "http2", "port": float64(80), "protocol": "TCP"})
		}},
		{"name starting with a digit", func(c sdk.Object) { objMeta(c)["name"] = "1lb" }},
		{"name with a capital", func(c sdk.Object) { objMeta(c)["name"] = "Lb" }},
		{"name with a dot", func(c sdk.Object) { objMeta(c)["name"] = "lb.web" }},
	},
	"rbac.authorization.k8s.io/v1/ClusterRole": {
		{"name with a colon", func(c sdk.Object) { objMeta(c)["name"] = "system:lb-speaker" }},
		{"name with a slash", func(c sdk.Object) { objMeta(c)["name"] = "lb/speaker" }},
	},
	"policy/v1/PodDisruptionBudget": {
		{"maxUnavailable 10 without %", func(c sdk.Object) { c["spec"].(map[string]any)["maxUnavailable"] = "10" }},
		{"maxUnavailable 1", func(c sdk.Object) { c["spec"].(map[string]any)["maxUnavailable"] = int64(1) }},
	},
}

// container is the first container of a workload's pod template.
func container(c sdk.Object) map[string]any {
	ps := c["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return ps["containers"].([]any)[0].(map[string]any)
}

// celNearMisses set spec fields to values on each side of the CRDs' CEL
// rules (MetalLB's: a BGPPeer's connectTime, a BGPAdvertisement's
// serviceSelectors with an aggregation length).
var celNearMisses = map[string][]struct {
	what string
	spec map[string]any
}{
	"metallb.io/v1beta2/BGPPeer": {
		{"connectTime 5s", map[string]any{"connectTime": "5s"}},
		{"connectTime 2m", map[string]any{"connectTime": "2m"}},
		{"connectTime 0s", map[string]any{"connectTime": "0s"}},
		{"connectTime 65536s", map[string]any{"connectTime": "65536s"}},
		{"connectTime 1500ms", map[string]any{"connectTime": "1500ms"}},
		{"connectTime not a duration", map[string]any{"connectTime": "soon"}},
	},
	"metallb.io/v1beta1/BGPAdvertisement": {
		{"serviceSelectors", map[string]any{"serviceSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "web"}}}}},
		{"serviceSelectors, aggregationLength 32", map[string]any{"serviceSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "web"}}}, "aggregationLength": int64(32)}},
		{"serviceSelectors, aggregationLength 24", map[string]any{"serviceSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "web"}}}, "aggregationLength": int64(24)}},
		{"serviceSelectors, aggregationLengthV6 64", map[string]any{"serviceSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "web"}}}, "aggregationLengthV6": int64(64)}},
		{"no serviceSelectors, aggregationLength 24", map[string]any{"serviceSelectors": []any{}, "aggregationLength": int64(24)}},
	},
}

type leaf struct {
	path  string
	keys  []any
	value any
}

// leaves lists the leaf values under v (the first element of each array).
func leaves(v any, prefix string) []leaf {
	var out []leaf
	var walk func(v any, path string, keys []any)
	walk = func(v any, path string, keys []any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(x[k], path+"."+k, append(append([]any{}, keys...), k))
			}
		case []any:
			if len(x) > 0 {
				walk(x[0], path+"[0]", append(append([]any{}, keys...), 0))
			}
			out = append(out, leaf{path, keys, v})
		default:
			out = append(out, leaf{path, keys, v})
		}
	}
	walk(v, prefix, []any{prefix})
	return out
}

func setPath(o sdk.Object, keys []any, v any) {
	var cur any = map[string]any(o)
	for i, k := range keys {
		last := i == len(keys)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[k.(string)] = v
				return
			}
			cur = c[k.(string)]
		case []any:
			if last {
				c[k.(int)] = v
				return
			}
			cur = c[k.(int)]
		}
	}
}

func otherType(v any) any {
	switch v.(type) {
	case string:
		return 7
	case bool, float64, json.Number, int64:
		return "seven"
	case []any:
		return "a string, not a list"
	default:
		return true
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func objMeta(o sdk.Object) map[string]any { return o["metadata"].(map[string]any) }

func name(o sdk.Object) string {
	m := objMeta(o)
	n, _ := m["name"].(string)
	if len(n) > 40 {
		n = n[:20] + "…"
	}
	ns, _ := m["namespace"].(string)
	return ns + "/" + n
}

func deepCopy(o sdk.Object) sdk.Object {
	b, _ := json.Marshal(o)
	var c sdk.Object
	_ = json.Unmarshal(b, &c)
	return c
}

func verdict(err error) string {
	if err == nil {
		return "accepts"
	}
	return "refuses (" + err.Error() + ")"
}

// validate is the SDK validator's verdict on one object, emitted by a
// module that declares its kind in its namespace.
func validate(o sdk.Object) error {
	av, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	ns, _ := objMeta(o)["namespace"].(string)
	d := sdk.Description{APIVersion: sdk.APIVersion, Kind: sdk.KindDescribeResponse, Name: "corpus", Version: "0",
		Emits: []sdk.ObjectKind{{APIVersion: av, Kind: kind, Namespace: ns}}}
	resp := sdk.GenerateResponse{APIVersion: sdk.APIVersion, Kind: sdk.KindGenerateResponse, Objects: []sdk.Object{o}}
	return wasmhost.ValidateOutput(d, sdk.GenerateRequest{}, resp)
}

// applyDryRun applies o as the CCM does, changing nothing.
func applyDryRun(ctx context.Context, c *cluster, o sdk.Object) error {
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	av, _ := o["apiVersion"].(string)
	gv, err := schema.ParseGroupVersion(av)
	if err != nil {
		return err
	}
	kind, _ := o["kind"].(string)
	mapping := map[string]string{"ConfigMap": "configmaps", "Secret": "secrets", "IPAddressPool": "ipaddresspools",
		"BGPPeer": "bgppeers", "BGPAdvertisement": "bgpadvertisements", "L2Advertisement": "l2advertisements",
		"Community": "communities", "BFDProfile": "bfdprofiles",
		"Service": "services", "ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings",
		"ClusterRole": "clusterroles", "Lease": "leases", "EndpointSlice": "endpointslices",
		"PodDisruptionBudget": "poddisruptionbudgets", "NetworkPolicy": "networkpolicies", "DaemonSet": "daemonsets",
		"Deployment": "deployments"}
	res, ok := mapping[kind]
	if !ok {
		return fmt.Errorf("no resource known for kind %s", kind)
	}
	ns, _ := objMeta(o)["namespace"].(string)
	n, _ := objMeta(o)["name"].(string)
	force := true
	_, err = c.dyn.Resource(gv.WithResource(res)).Namespace(ns).Patch(ctx, n, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldmanager.CCM, Force: &force, FieldValidation: "Strict", DryRun: []string{metav1.DryRunAll}})
	return err
}
