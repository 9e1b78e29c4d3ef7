package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

// decisionSeeds are rule values, as JSON: the valid shapes and the near
// misses a policy author writes.
var decisionSeeds = []string{
	`{"metro":"da"}`, `{"facility":"da11"}`, `{"metro":"da","facility":"da11"}`, `{"Metro":"da"}`,
	`{"metro":""}`, `{"metro":1}`, `{"metro":null}`, `{}`, `"da"`, `null`, `true`, `1e400`, `12.5`,
	`["n1"]`, `["n1","n2"]`, `["n3"]`, `[1]`, `[]`, `[["n1"]]`, `{"n1":true}`,
	`["no location", "set\nthe metro"]`, `[{"msg":"x"}]`, `"deny me"`,
	`["` + strings.Repeat("é", 150) + `"]`, `{"metro":"` + strings.Repeat("日", 100) + `"}`,
}

// FuzzDecisionValue fuzzes the decoders of rule values (placementFrom for
// data.equinix.eip.placement, messages for the deny sets) with any JSON
// value, decoded as OPA hands results to Go (numbers as json.Number).
// They never panic; a placement they accept is exactly one non-empty
// metro or facility, the object it came from; messages are one line each,
// sorted.
func FuzzDecisionValue(f *testing.F) {
	for _, s := range decisionSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		if loc, err := placementFrom(v); err == nil {
			if loc.Validate() != nil {
				t.Fatalf("%s: placement %+v is not one location", b, loc)
			}
			want := map[string]any{"metro": loc.Metro}
			if loc.Facility != "" {
				want = map[string]any{"facility": loc.Facility}
			}
			if !equalJSON(v, want) {
				t.Fatalf("%s: placement %+v, from another object", b, loc)
			}
		}
		for _, binding := range []any{v, []any{v}} {
			msgs, err := messages(binding)
			if err != nil {
				checkLine(t, err.Error())
				continue
			}
			if !slices.IsSorted(msgs) {
				t.Fatalf("%s: messages not sorted: %q", b, msgs)
			}
			for _, m := range msgs {
				checkLine(t, m)
			}
		}
	})
}

// FuzzEngineDecision puts fuzzed JSON values in place of the rules' values,
// through a policy directory whose rules are json.unmarshal of what the
// input carries, and evaluates them with Engine.Placement and
// Engine.SelectNodes as the CCM does. Every decision is either valid (one
// location; only names of input.nodes) or an error of exactly one kind,
// on one line of valid UTF-8 (it becomes an Event), that names the rule
// whose value is wrong. It also runs the built-in placement policy on the
// same strings as the Service's metro and facility annotations: the
// location is the facility's, else the metro's, else a denial.
func FuzzEngineDecision(f *testing.F) {
	for _, d := range decisionSeeds {
		f.Add(d, "")
	}
	for _, d := range []string{`["it is late"]`, `[]`, `"not a set"`, `[1, {"a": "b"}]`, `{`, `["` + strings.Repeat("ü", 200) + `"]`} {
		f.Add(`{"metro":"da"}`, d)
		f.Add(`["n1"]`, d)
	}
	f.Add("", "")
	f.Add("da", "da11")
	dir := f.TempDir()
	for name, src := range map[string]string{
		"eip.rego": `package equinix.eip

placement := json.unmarshal(input.service.annotations.decision)

deny := json.unmarshal(input.service.annotations.deny)
`,
		"bgp.rego": `package equinix.bgp

selected_nodes := json.unmarshal(input.nodes[0].labels.decision)

deny := json.unmarshal(input.nodes[0].labels.deny)
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	ctx := context.Background()
	e, err := Load(ctx, dir, Options{})
	if err != nil {
		f.Fatal(err)
	}
	builtin, err := Load(ctx, "", Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, decision, deny string) {
		input := map[string]string{}
		if decision != "" {
			input["decision"] = decision
		}
		if deny != "" {
			input["deny"] = deny
		}
		loc, err := e.Placement(ctx, PlacementInput{Service: Service{Namespace: "ns", Name: "svc", Annotations: input}})
		if err == nil {
			if loc.Validate() != nil {
				t.Fatalf("placement %q: %+v is not one location", decision, loc)
			}
		} else {
			checkDecisionError(t, err, placementRule, placementDeny)
		}

		nodes := []Node{{Name: "n1", Labels: input}, {Name: "n2"}}
		sel, err := e.SelectNodes(ctx, SelectionInput{Nodes: nodes})
		if err == nil {
			for name := range sel {
				if name != "n1" && name != "n2" {
					t.Fatalf("selection %q selected %q, not a node", decision, name)
				}
			}
		} else {
			checkDecisionError(t, err, selectionRule, selectionDeny)
		}

		// The built-in policy, with the strings as the Service's location
		// annotations.
		const metroAnn, facilityAnn = "metal.equinix.com/eip-metro", "metal.equinix.com/eip-facility"
		svc := Service{Namespace: "ns", Name: "svc", Annotations: map[string]string{metroAnn: decision, facilityAnn: deny}}
		loc, err = builtin.Placement(ctx, PlacementInput{Service: svc, Config: PlacementConfig{AnnotationEIPMetro: metroAnn, AnnotationEIPFacility: facilityAnn}})
		want := location.Location{Facility: deny}
		if deny == "" {
			want = location.Location{Metro: decision}
		}
		switch {
		case want == location.Location{}:
			if !Denied(err) {
				t.Fatalf("no location annotation: %+v, %v; want a denial", loc, err)
			}
			checkDecisionError(t, err, placementRule, placementDeny)
		case err != nil || loc != want:
			t.Fatalf("annotations metro %q, facility %q: %+v, %v; want %+v", decision, deny, loc, err, want)
		}
	})
}

// checkDecisionError: err is of exactly one kind, one line of valid UTF-8,
// and names the rule or deny rule it is about (a denial carries the rule).
func checkDecisionError(t *testing.T, err error, rule, denyRule string) {
	t.Helper()
	kinds := 0
	for _, k := range []error{errDenied, errUndefined, ErrInvalidDecision, ErrEvaluation, ErrTimeout} {
		if errors.Is(err, k) {
			kinds++
		}
	}
	if kinds != 1 {
		t.Fatalf("error of %d kinds: %v", kinds, err)
	}
	msg := err.Error()
	checkLine(t, msg)
	var de *denyError
	switch {
	case errors.As(err, &de):
		if de.Rule != denyRule || len(de.Messages) == 0 {
			t.Fatalf("denial %+v, want rule %s and messages", de, denyRule)
		}
	case errors.Is(err, ErrEvaluation):
		// A builtin's failure (json.unmarshal of what is not JSON) is
		// named by its place in the policy, not by the rule queried.
	case !strings.Contains(msg, rule) && !strings.Contains(msg, denyRule):
		t.Fatalf("error names neither %s nor %s: %v", rule, denyRule, msg)
	}
}

func checkLine(t *testing.T, s string) {
	t.Helper()
	if strings.ContainsAny(s, "\n\r") || !utf8.ValidString(s) {
		t.Fatalf("not one line of valid UTF-8: %q", s)
	}
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
