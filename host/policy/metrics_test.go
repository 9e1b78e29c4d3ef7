package policy

import (
	"maps"
	"testing"

	"k8s.io/component-base/metrics/testutil"
)

// metricCounts is a snapshot of one decision's counters.
type metricCounts struct {
	decisions, denials float64
	errors             map[string]float64 // by reason
}

var reasons = []string{"undefined", "invalid", "evaluation", "timeout"}

func counters(decision string) metricCounts {
	get := func(v float64, err error) float64 {
		if err != nil {
			panic(err)
		}
		return v
	}
	c := metricCounts{
		decisions: get(testutil.GetCounterMetricValue(decisionsTotal.WithLabelValues(decision))),
		denials:   get(testutil.GetCounterMetricValue(denialsTotal.WithLabelValues(decision))),
		errors:    map[string]float64{},
	}
	for _, r := range reasons {
		c.errors[r] = get(testutil.GetCounterMetricValue(errorsTotal.WithLabelValues(decision, r)))
	}
	return c
}

func (c metricCounts) minus(o metricCounts) metricCounts {
	d := metricCounts{decisions: c.decisions - o.decisions, denials: c.denials - o.denials, errors: map[string]float64{}}
	for r, v := range c.errors {
		if v-o.errors[r] != 0 {
			d.errors[r] = v - o.errors[r]
		}
	}
	return d
}

func (c metricCounts) equal(o metricCounts) bool {
	if len(c.errors) == 0 && len(o.errors) == 0 {
		return c.decisions == o.decisions && c.denials == o.denials
	}
	return c.decisions == o.decisions && c.denials == o.denials && maps.Equal(c.errors, o.errors)
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func reloadCounts(t *testing.T) (success, failure, failing float64) {
	t.Helper()
	var err error
	if success, err = testutil.GetCounterMetricValue(reloadsTotal.WithLabelValues("success")); err != nil {
		t.Fatal(err)
	}
	if failure, err = testutil.GetCounterMetricValue(reloadsTotal.WithLabelValues("failure")); err != nil {
		t.Fatal(err)
	}
	if failing, err = testutil.GetGaugeMetricValue(reloadFailing); err != nil {
		t.Fatal(err)
	}
	return success, failure, failing
}

// TestMetricsOnSuccess checks that a good decision counts as a decision
// only, and that the metrics carry the documented names.
func TestMetricsOnSuccess(t *testing.T) {
	e := mustLoad(t, "", Options{})
	before := counters(decisionPlacement)
	if _, err := e.Placement(t.Context(), PlacementInput{Service: serviceWith(nil), Config: PlacementConfig{Metro: "da"}}); err != nil {
		t.Fatal(err)
	}
	if d := counters(decisionPlacement).minus(before); !d.equal(metricCounts{decisions: 1}) {
		t.Errorf("metrics changed by %+v, want one decision", d)
	}
	for _, name := range []string{
		decisionsTotal.FQName(), denialsTotal.FQName(), errorsTotal.FQName(), evalDuration.FQName(), reloadsTotal.FQName(), reloadFailing.FQName(),
	} {
		if len(name) < len("equinix_metal_policy_") || name[:len("equinix_metal_policy_")] != "equinix_metal_policy_" {
			t.Errorf("metric %q lacks the equinix_metal_policy_ prefix", name)
		}
	}
}
