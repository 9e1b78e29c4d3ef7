package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
)

// Rule is one CEL rule of a CRD (x-kubernetes-validations): the API server
// refuses an object for which it is false or fails.
type Rule struct {
	Rule    string `json:"rule"`
	Message string `json:"message,omitempty"`

	program cel.Program
	// transition: the rule names oldSelf, so the API server evaluates it
	// only on an update, against the stored object, which no check here
	// has.
	transition bool
}

// celEnv is the CEL environment of the rules: the standard library with
// the cel-go options and extensions the API server's base environment
// (k8s.io/apiserver/pkg/cel/environment) enables. Its Kubernetes
// libraries (isURL, quantity, ip, cidr, semver, format, authz, regex's
// find) are not here, so the SDK stays free of k8s.io: a rule that calls
// one fails to compile, and the SDK's test of the embedded schemas fails
// with it, rather than the rule going unchecked. self and oldSelf are
// dynamic: the rules' values are those of objects already checked against
// the schema.
var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("self", cel.DynType),
		cel.Variable("oldSelf", cel.DynType),
		cel.HomogeneousAggregateLiterals(),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ext.Lists(),
		ext.TwoVarComprehensions(),
	)
	if err != nil {
		panic(err)
	}
	return env
}

// compileRule compiles r for evaluation.
func compileRule(r *Rule) error {
	ast, iss := celEnv().Compile(r.Rule)
	if iss.Err() != nil {
		return fmt.Errorf("CEL rule %q: %v", r.Rule, iss.Err())
	}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == "oldSelf" {
			r.transition = true
		}
	}
	if !r.transition {
		// A reference map is not always filled for variables of
		// dynamic type: look at the source's identifiers too.
		r.transition = mentionsOldSelf(r.Rule)
	}
	p, err := celEnv().Program(ast)
	if err != nil {
		return fmt.Errorf("CEL rule %q: %v", r.Rule, err)
	}
	r.program = p
	return nil
}

// mentionsOldSelf reports whether src names the identifier oldSelf.
func mentionsOldSelf(src string) bool {
	for i := 0; ; {
		j := strings.Index(src[i:], "oldSelf")
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || !identChar(src[j-1])
		after := j+len("oldSelf") == len(src) || !identChar(src[j+len("oldSelf")])
		if before && after {
			return true
		}
		i = j + len("oldSelf")
	}
}

func identChar(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// rules evaluates s's rules on v, a value that passed s's other checks.
// As the API server does: absent members with a default take it, a
// number is an int where the schema wants an integer, and a rule that is
// false or fails to evaluate refuses the object.
func (w *walker) rules(v any, s *Schema) bool {
	self := celValue(v, s)
	for i := range s.Rules {
		r := &s.Rules[i]
		if r.transition {
			continue
		}
		out, _, err := r.program.Eval(map[string]any{"self": self})
		if err != nil {
			return w.fail("the CRD's rule %s failed to evaluate: %v", strconv.Quote(r.Rule), err)
		}
		if out != types.True {
			msg := r.Message
			if msg == "" {
				msg = "failed rule: " + r.Rule
			}
			return w.fail("%s (the CRD's rule %s)", msg, strconv.Quote(r.Rule))
		}
	}
	return true
}

// celValue is v as CEL sees it under s (nil: no schema).
func celValue(v any, s *Schema) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if val == nil {
				continue // dropped by the API server
			}
			out[k] = celValue(val, memberSchema(s, k))
		}
		if s != nil {
			for k, p := range s.Properties {
				if _, ok := out[k]; !ok && p.Default != nil {
					out[k] = celValue(p.Default, p)
				}
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		var item *Schema
		if s != nil {
			item = s.Items
		}
		for i, val := range x {
			out[i] = celValue(val, item)
		}
		return out
	case number:
		if i, err := x.Int64(); err == nil && (s == nil || s.Type != "number") {
			return i
		}
		f, _ := x.Float64()
		return f
	case float64: // a default, as encoding/json decodes it
		if s != nil && (s.Type == "integer" || s.IntOrString) && x == float64(int64(x)) {
			return int64(x)
		}
		return x
	}
	return v
}

func memberSchema(s *Schema, k string) *Schema {
	if s == nil {
		return nil
	}
	if p := s.Properties[k]; p != nil {
		return p
	}
	return s.AdditionalProperties
}
