package docs

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// rulesFile holds the chart's alerts (deploy/chart/files, tested there
// with promtool by make promtool-test).
const rulesFile = "../deploy/chart/files/prometheus-rules.yaml"

var (
	metricName  = regexp.MustCompile(`\bequinix_metal_[a-z0-9_]+\b`)
	rateOf      = regexp.MustCompile(`\b(?:rate|irate|increase)\(\s*(equinix_metal_[a-z0-9_]+)`)
	eventReason = regexp.MustCompile(`\b([A-Z][A-Za-z]+) Events?\b`)
)

// TestAlertRules: the chart's alerts use only metrics the code defines
// (rate and increase only of counters), and name only Event reasons the
// code records: an alert on a metric that was renamed would never fire.
func TestAlertRules(t *testing.T) {
	pkgs := parsePackages(t)
	kinds := map[string]string{}
	for _, m := range codeMetrics(t, pkgs) {
		kinds[m.name] = m.kind
		if m.kind == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				kinds[m.name+s] = "counter"
			}
		}
	}
	reasons := codeEventReasons(t, pkgs)
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			n++
			names := metricName.FindAllString(r.Expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: expr %q uses no equinix_metal_ metric", r.Alert, r.Expr)
			}
			for _, name := range names {
				if kinds[name] == "" {
					t.Errorf("%s: %s is not a metric the code defines (docs/metrics.md)", r.Alert, name)
				}
			}
			for _, m := range rateOf.FindAllStringSubmatch(r.Expr, -1) {
				if k := kinds[m[1]]; k != "" && k != "counter" {
					t.Errorf("%s: rate or increase of %s, a %s", r.Alert, m[1], k)
				}
			}
			for _, text := range r.Annotations {
				for _, m := range eventReason.FindAllStringSubmatch(text, -1) {
					if !slices.Contains(reasons, m[1]) {
						t.Errorf("%s: the annotation names Event %s, which the code does not record (docs/events.md)", r.Alert, m[1])
					}
				}
			}
		}
	}
	if n < 5 {
		t.Fatalf("found only %d alerts in %s", n, rulesFile)
	}
}
