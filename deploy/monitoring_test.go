package deploy_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

const (
	rulesFile     = deploy.ChartDir + "/files/prometheus-rules.yaml"
	rulesTestFile = deploy.ChartDir + "/files/prometheus-rules_test.yaml"
	// readerName is the ServiceAccount (and ClusterRole) the ServiceMonitor
	// scrapes as, with the release's default names.
	readerName = "cloud-provider-equinix-metal-metrics-reader"
)

// ruleGroups reads files/prometheus-rules.yaml as the template reads it.
func ruleGroups(t *testing.T) []any {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	groups, _ := m["groups"].([]any)
	if len(groups) == 0 {
		t.Fatalf("%s has no groups", rulesFile)
	}
	return groups
}

// alertRules are the rules of groups, in order.
func alertRules(groups []any) []map[string]any {
	var out []map[string]any
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			out = append(out, r.(map[string]any))
		}
	}
	return out
}

func renderedGroups(t *testing.T, objs []*unstructured.Unstructured) []any {
	t.Helper()
	pr := find(objs, "PrometheusRule", deploy.Namespace, "cloud-provider-equinix-metal")
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	groups, _, err := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// TestChartPrometheusRule: off by default; on, its groups are exactly those
// of files/prometheus-rules.yaml, the file `make promtool-test` tests, so
// what is tested is what is installed. disabled drops alerts by name and
// additionalRuleLabels adds labels without overriding an alert's own.
func TestChartPrometheusRule(t *testing.T) {
	if pr := find(renderChart(t, required()), "PrometheusRule", deploy.Namespace, "cloud-provider-equinix-metal"); pr != nil {
		t.Error("a PrometheusRule by default; it is opt-in")
	}
	// The chart carries the rules, not their promtool tests (.helmignore).
	ch, err := deploycheck.LoadChart(deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range ch.Files {
		files = append(files, f.Name)
	}
	if !slices.Contains(files, "files/prometheus-rules.yaml") || slices.Contains(files, "files/prometheus-rules_test.yaml") {
		t.Errorf("chart files %v: want files/prometheus-rules.yaml and not its tests", files)
	}
	want := ruleGroups(t)
	objs := renderChart(t, with(`metrics: {prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}}`))
	if got := renderedGroups(t, objs); !reflect.DeepEqual(got, want) {
		gb, _ := yaml.Marshal(got)
		t.Errorf("the PrometheusRule's groups differ from %s:\n%s", rulesFile, gb)
	}
	pr := find(objs, "PrometheusRule", deploy.Namespace, "cloud-provider-equinix-metal")
	if pr.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("labels %v lack metrics.prometheusRule.labels", pr.GetLabels())
	}

	objs = renderChart(t, with(`
metrics:
  prometheusRule:
    enabled: true
    additionalRuleLabels: {team: platform, severity: page}
    disabled: {EquinixMetalOrphanedElasticIPs: true, EquinixMetalAPIUnreachable: false}
`))
	got := alertRules(renderedGroups(t, objs))
	all := alertRules(want)
	if len(got) != len(all)-1 {
		t.Errorf("%d alerts with one disabled, want %d", len(got), len(all)-1)
	}
	for _, r := range got {
		labels, _ := r["labels"].(map[string]any)
		if r["alert"] == "EquinixMetalOrphanedElasticIPs" {
			t.Error("disabled alert EquinixMetalOrphanedElasticIPs is still there")
		}
		if labels["team"] != "platform" || labels["severity"] == "page" {
			t.Errorf("%s: labels %v; want team=platform added and its own severity kept", r["alert"], labels)
		}
	}
}

// TestPrometheusRulesFile: every alert of files/prometheus-rules.yaml is
// written as the kube-prometheus-stack conventions want it (a severity, a
// summary, a description, a runbook in docs/troubleshooting.md), and has a
// promtool test that fires it and one that finds it silent.
func TestPrometheusRulesFile(t *testing.T) {
	doc, err := os.ReadFile("../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	const runbooks = "https://github.com/metal-ccm/cloud-provider-equinix-metal/blob/main/docs/troubleshooting.md#"
	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tests.RuleFiles, []string{"prometheus-rules.yaml"}) {
		t.Errorf("%s tests %v, want prometheus-rules.yaml", rulesTestFile, tests.RuleFiles)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, g := range tests.Tests {
		for _, a := range g.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range alertRules(ruleGroups(t)) {
		name, _ := r["alert"].(string)
		if name == "" || seen[name] {
			t.Errorf("a rule without an alert name, or a second %q", name)
			continue
		}
		seen[name] = true
		labels, _ := r["labels"].(map[string]any)
		if s := labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("%s: severity %v, want critical, warning or info", name, s)
		}
		if _, ok := r["for"].(string); !ok {
			t.Errorf("%s has no for:", name)
		}
		ann, _ := r["annotations"].(map[string]any)
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if s, _ := ann[k].(string); s == "" {
				t.Errorf("%s has no %s annotation", name, k)
			}
		}
		anchor, ok := strings.CutPrefix(ann["runbook_url"].(string), runbooks)
		if !ok || anchor != strings.ToLower(name) || !strings.Contains(string(doc), "\n### "+name+"\n") {
			t.Errorf("%s: runbook_url %v, want %s%s and a section \"### %s\" in docs/troubleshooting.md", name, ann["runbook_url"], runbooks, strings.ToLower(name), name)
		}
		if !fires[name] || !silent[name] {
			t.Errorf("%s: %s needs a test where it fires (%v) and one where it is silent (%v)", name, rulesTestFile, fires[name], silent[name])
		}
	}
	for name := range fires {
		if !seen[name] {
			t.Errorf("%s tests alert %s, which %s does not have", rulesTestFile, name, rulesFile)
		}
	}
}

// TestChartServiceMonitor: the ServiceMonitor sends the token of a Secret
// (authorization; no bearerTokenFile, which prometheus-operator deprecates
// and which would send Prometheus' own token) and verifies the serving
// certificate; without a certificate to verify, the chart refuses to
// render rather than turning verification off.
func TestChartServiceMonitor(t *testing.T) {
	objs := renderChart(t, with(`
metrics:
  tls: {secretName: ccm-metrics-tls}
  serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}}
`))
	sm := find(objs, "ServiceMonitor", deploy.Namespace, "cloud-provider-equinix-metal")
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("%d endpoints", len(eps))
	}
	ep := eps[0].(map[string]any)
	for _, deprecated := range []string{"bearerTokenFile", "bearerTokenSecret"} {
		if _, ok := ep[deprecated]; ok {
			t.Errorf("the endpoint has %s", deprecated)
		}
	}
	want := map[string]any{
		"port": "https", "scheme": "https", "interval": "30s",
		"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": readerName + "-token", "key": "token"}},
		"tlsConfig": map[string]any{
			"ca":         map[string]any{"secret": map[string]any{"name": "ccm-metrics-tls", "key": "ca.crt"}},
			"serverName": "cloud-provider-equinix-metal-metrics.kube-system.svc",
		},
	}
	if !reflect.DeepEqual(ep, want) {
		t.Errorf("endpoint\n got %v\nwant %v", ep, want)
	}
	secret := find(objs, "Secret", deploy.Namespace, readerName+"-token")
	if secret == nil || secret.Object["type"] != "kubernetes.io/service-account-token" || secret.GetAnnotations()["kubernetes.io/service-account.name"] != readerName {
		t.Errorf("token Secret %v, want a kubernetes.io/service-account-token of %s", secret, readerName)
	}
	// The secure port serves the Secret's certificate.
	c := container(t, find(objs, "Deployment", deploy.Namespace, "cloud-provider-equinix-metal"))
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	if !slices.Contains(args, "--tls-cert-file=/etc/ccm/serving/tls.crt") || !slices.Contains(args, "--tls-private-key-file=/etc/ccm/serving/tls.key") {
		t.Errorf("args %v do not serve the certificate of metrics.tls.secretName", args)
	}

	// An existing token Secret, and a tlsConfig of one's own, as given.
	objs = renderChart(t, with(`
metrics:
  serviceMonitor:
    enabled: true
    authorization: {create: false, secretName: prometheus-token, key: tok}
    tlsConfig: {ca: {configMap: {name: cluster-ca, key: ca.crt}}, serverName: ccm.example}
`))
	if find(objs, "ServiceAccount", deploy.Namespace, readerName) != nil || find(objs, "ClusterRole", "", readerName) != nil {
		t.Error("authorization.create=false still creates the reader")
	}
	ep = mustEndpoint(t, objs)
	if got, _, _ := unstructured.NestedStringMap(ep, "authorization", "credentials"); got["name"] != "prometheus-token" || got["key"] != "tok" {
		t.Errorf("credentials %v, want prometheus-token/tok", got)
	}
	if got, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName"); got != "ccm.example" {
		t.Errorf("tlsConfig %v is not metrics.serviceMonitor.tlsConfig", ep["tlsConfig"])
	}

	ch, err := deploycheck.LoadChart(deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ values, want string }{
		{`metrics: {serviceMonitor: {enabled: true}}`, "metrics.tls.secretName"},
		{`metrics: {tls: {secretName: x}, serviceMonitor: {enabled: true, authorization: {create: false}}}`, "authorization.secretName"},
	} {
		_, err := deploycheck.RenderChart(ch, with(tc.values), deploy.Namespace)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", tc.values, err, tc.want)
		}
	}
}

func mustEndpoint(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	sm := find(objs, "ServiceMonitor", deploy.Namespace, "cloud-provider-equinix-metal")
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("%d endpoints", len(eps))
	}
	return eps[0].(map[string]any)
}

// TestChartMetricsReader sends the objects of a monitored install (all but
// the prometheus-operator ones, whose CRDs a bare API server lacks) to a
// real kube-apiserver, installs the reader's RBAC and asks the server what
// the reader may do: get /metrics, and nothing else.
func TestChartMetricsReader(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	objs := renderChart(t, with(`
metrics:
  tls: {secretName: ccm-metrics-tls}
  serviceMonitor: {enabled: true}
  prometheusRule: {enabled: true}
`))
	var core, reader []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().Group == "monitoring.coreos.com" {
			continue
		}
		core = append(core, o)
		if strings.HasPrefix(o.GetName(), readerName) && o.GetKind() != "Secret" {
			reader = append(reader, o)
		}
	}
	if len(reader) != 3 {
		t.Fatalf("reader objects %d, want ServiceAccount, ClusterRole, ClusterRoleBinding", len(reader))
	}
	if _, err := deploycheck.DryRun(ctx, env.Config, core); err != nil {
		t.Fatal(err)
	}
	if err := deploycheck.Apply(ctx, env.Config, reader); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + deploy.Namespace + ":" + readerName
	allowed := func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		spec.User, spec.Groups = user, []string{"system:serviceaccounts", "system:serviceaccounts:" + deploy.Namespace, "system:authenticated"}
		r, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	metrics := authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}
	// RBAC reads its objects through an informer: wait for the binding.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return allowed(metrics), nil
	})
	if err != nil {
		t.Fatalf("%s may not get /metrics: %v", user, err)
	}
	for _, spec := range []authorizationv1.SubjectAccessReviewSpec{
		{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "post"}},
		{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/debug/pprof/heap", Verb: "get"}},
		{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"}},
		{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: deploy.Namespace}},
	} {
		if allowed(spec) {
			t.Errorf("%s may %+v %+v", user, spec.NonResourceAttributes, spec.ResourceAttributes)
		}
	}
}

// TestChartNotes: NOTES.txt renders for every case of TestChartRenders,
// names the Deployment and the readiness port the chart configures, and
// says whether load balancing is on.
func TestChartNotes(t *testing.T) {
	ch, err := deploycheck.LoadChart(deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range chartCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			notes, err := deploycheck.RenderChartNotes(ch, tc.values, deploy.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				"kubectl -n kube-system rollout status deployment/cloud-provider-equinix-metal",
				"port-forward pod/<pod> 10270:10270", "localhost:10270/readyz?verbose",
				"--field-selector source=cloud-provider-equinix-metal",
			} {
				if !strings.Contains(notes, want) {
					t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
				}
			}
			lbOn := tc.lbEnv != "" || tc.lbRole != ""
			if got := strings.Contains(notes, "kubectl create service loadbalancer"); got != lbOn {
				t.Errorf("NOTES.txt shows a first LoadBalancer Service: %v, want %v (load balancing on):\n%s", got, lbOn, notes)
			}
		})
	}
	// The port NOTES.txt forwards is the one the readiness probe asks.
	c := container(t, find(renderChart(t, required()), "Deployment", deploy.Namespace, "cloud-provider-equinix-metal"))
	if port, _, _ := unstructured.NestedFieldNoCopy(c, "readinessProbe", "httpGet", "port"); fmt.Sprint(port) != "10270" {
		t.Errorf("readiness probe on port %v; NOTES.txt says 10270", port)
	}
}
