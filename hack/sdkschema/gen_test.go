package sdkschema

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the SDK's embedded schemas")

// schemaDir is where the SDK embeds the schemas (sdk/internal/schema).
const schemaDir = "../../sdk/internal/schema/schemas"

// builtinKinds are the built-in kinds the SDK knows the schema of: those
// the built-in modules write (metallb-configmap: ConfigMap; metallb-crd: the
// BGP password Secret). The host lets a module write any kind it declares;
// another built-in kind gets the checks that hold for every kind only. Add
// a kind here (and run -update) to check it too.
var builtinKinds = []struct{ apiVersion, kind string }{
	{"v1", "ConfigMap"},
	{"v1", "Secret"},
}

// TestSchemasUpToDate generates the SDK's schemas from their sources and
// fails if the embedded ones differ: Kubernetes' OpenAPI v3 spec as
// published in k8s.io/kubernetes at the release of the k8s.io/api in
// go.mod, and every CRD of the MetalLB version go.mod pins (the CRDs
// test/testenv installs). Both come from the module cache (go mod download
// fetches them if needed).
func TestSchemasUpToDate(t *testing.T) {
	files := map[string]schemaFile{
		"kubernetes.json": kubernetesSchemas(t),
		"metallb.json":    metallbSchemas(t),
	}
	for name, f := range files {
		got, err := json.MarshalIndent(f, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join(schemaDir, name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v; run go test ./hack/sdkschema -update", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what %s generates; run go test ./hack/sdkschema -update and commit the result", path, f.Source)
		}
	}
}

// schemaFile and schemaKind are the SDK's File and Kind
// (sdk/internal/schema/schema.go), which this module cannot import; the
// SDK's tests load what this writes with unknown fields refused.
type schemaFile struct {
	Source string       `json:"source"`
	Kinds  []schemaKind `json:"kinds"`
}

type schemaKind struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Schema     map[string]any `json:"schema"`
}

func kubernetesSchemas(t *testing.T) schemaFile {
	// k8s.io/api v0.X.Y is the API of Kubernetes v1.X.Y.
	api := goOutput(t, "", "list", "-m", "-f", "{{.Version}}", "k8s.io/api")
	if !strings.HasPrefix(api, "v0.") {
		t.Fatalf("k8s.io/api version %q does not map to a Kubernetes release", api)
	}
	version := "v1." + strings.TrimPrefix(api, "v0.")
	dir := moduleDir(t, "k8s.io/kubernetes", version)
	const spec = "api/openapi-spec/v3/api__v1_openapi.json"
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(spec)))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := decode(b, &doc); err != nil {
		t.Fatalf("%s: %v", spec, err)
	}
	defs := doc.Components.Schemas
	f := schemaFile{Source: "k8s.io/kubernetes@" + version + " " + spec}
	for _, k := range builtinKinds {
		name := definitionOf(defs, k.apiVersion, k.kind)
		if name == "" {
			t.Fatalf("%s has no schema of %s %s", spec, k.apiVersion, k.kind)
		}
		c := converter{defs: defs}
		s, err := c.root(defs[name], k.kind)
		if err != nil {
			t.Fatalf("%s %s: %v", k.apiVersion, k.kind, err)
		}
		f.Kinds = append(f.Kinds, schemaKind{k.apiVersion, k.kind, s})
	}
	return f
}

// definitionOf finds the definition whose x-kubernetes-group-version-kind
// is apiVersion and kind.
func definitionOf(defs map[string]map[string]any, apiVersion, kind string) string {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	for name, d := range defs {
		gvks, _ := d["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			if m["group"] == group && m["version"] == version && m["kind"] == kind {
				return name
			}
		}
	}
	return ""
}

func metallbSchemas(t *testing.T) schemaFile {
	const mod, sub = "go.universe.tf/metallb", "config/crd/bases"
	version := goOutput(t, "", "list", "-m", "-f", "{{.Version}}", mod)
	dir := filepath.Join(moduleDir(t, mod, version), filepath.FromSlash(sub))
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in %s (%v)", dir, err)
	}
	f := schemaFile{Source: mod + "@" + version + " " + sub}
	for _, p := range paths {
		y, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var crd struct {
			Kind string `json:"kind"`
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Served bool   `json:"served"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := decode(j, &crd); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			t.Fatalf("%s is a %s, not a CustomResourceDefinition", p, crd.Kind)
		}
		// Every served version: a module may write any of them
		// (BGPPeer is served as v1beta1 and v1beta2).
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			c := converter{}
			s, err := c.root(v.Schema.OpenAPIV3Schema, crd.Spec.Names.Kind)
			if err != nil {
				t.Fatalf("%s %s: %v", filepath.Base(p), v.Name, err)
			}
			f.Kinds = append(f.Kinds, schemaKind{crd.Spec.Group + "/" + v.Name, crd.Spec.Names.Kind, s})
		}
	}
	sort.Slice(f.Kinds, func(i, j int) bool {
		a, b := f.Kinds[i], f.Kinds[j]
		return a.APIVersion+"/"+a.Kind < b.APIVersion+"/"+b.Kind
	})
	return f
}

// converter turns an OpenAPI v3 schema into the SDK's structural subset.
// It refuses what the SDK's validator does not implement, so that a new
// keyword in a newer MetalLB or Kubernetes is a failing test here rather
// than a check silently skipped.
type converter struct {
	defs  map[string]map[string]any // for $ref
	depth int
}

// root converts the schema of a whole object. apiVersion, kind and
// metadata are left out: the host checks them itself (a module may set
// only name, namespace, labels and annotations). So is status, which the
// host refuses in a module's output.
func (c *converter) root(s map[string]any, kind string) (map[string]any, error) {
	if s == nil {
		return nil, fmt.Errorf("%s has no schema", kind)
	}
	s = clone(s)
	if props, ok := s["properties"].(map[string]any); ok {
		props = clone(props)
		for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
			delete(props, k)
		}
		s["properties"] = props
	}
	if req, ok := s["required"].([]any); ok {
		var keep []any
		for _, r := range req {
			switch r {
			case "apiVersion", "kind", "metadata", "status":
			default:
				keep = append(keep, r)
			}
		}
		s["required"] = keep
	}
	return c.convert(s, "")
}

// ignored are keywords left out on purpose.
var ignored = map[string]string{
	"description":                     "documentation",
	"example":                         "documentation",
	"x-kubernetes-group-version-kind": "identifies the kind, already known",
	"x-kubernetes-map-type":           "merge strategy, not validation",
	"x-kubernetes-patch-strategy":     "merge strategy, not validation",
	"x-kubernetes-patch-merge-key":    "merge strategy, not validation",
}

func (c *converter) convert(s map[string]any, at string) (map[string]any, error) {
	if c.depth > 64 {
		return nil, fmt.Errorf("%s: nested more than 64 deep (a recursive schema?)", at)
	}
	c.depth++
	defer func() { c.depth-- }()
	if ref, err := c.reference(s, at); err != nil || ref != nil {
		if err != nil {
			return nil, err
		}
		return c.convert(ref, at)
	}
	out := map[string]any{}
	for k, v := range s {
		switch k {
		case "type", "pattern":
			out[k] = v
		case "default":
			// The API server fills it in before it validates: the
			// CEL rules see it (a property with one is also dropped
			// from required, below).
			out[k] = v
		case "x-kubernetes-validations":
			rules, err := celRules(v, at)
			if err != nil {
				return nil, err
			}
			out[k] = rules
		case "format":
			// Only "byte" is checked; the API server checks no integer
			// format, and any other string format would need its check.
			switch {
			case v == "byte":
				out[k] = v
			case s["type"] == "integer" || s["type"] == "number":
			default:
				return nil, fmt.Errorf("%s: format %v is not checked by the SDK's validator; add it there", at, v)
			}
		case "properties":
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				sub, err := c.convert(p.(map[string]any), join(at, name))
				if err != nil {
					return nil, err
				}
				props[name] = sub
			}
			if len(props) > 0 {
				out[k] = props
			}
		case "additionalProperties":
			switch v := v.(type) {
			case bool:
				if v {
					out[k] = map[string]any{}
				}
			case map[string]any:
				sub, err := c.convert(v, join(at, "*"))
				if err != nil {
					return nil, err
				}
				out[k] = sub
			}
		case "items":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: items is not one schema", at)
			}
			sub, err := c.convert(m, at+"[]")
			if err != nil {
				return nil, err
			}
			out[k] = sub
		case "required":
			var keep []any
			props, _ := s["properties"].(map[string]any)
			for _, r := range v.([]any) {
				p, _ := props[r.(string)].(map[string]any)
				if _, defaulted := p["default"]; !defaulted {
					keep = append(keep, r)
				}
			}
			if len(keep) > 0 {
				out[k] = keep
			}
		case "enum":
			for _, e := range v.([]any) {
				if _, ok := e.(string); !ok {
					return nil, fmt.Errorf("%s: enum value %v is not a string; the SDK's validator checks string enums only", at, e)
				}
			}
			out[k] = v
		case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minimum", "maximum":
			out[k] = v
		case "exclusiveMinimum", "exclusiveMaximum", "nullable", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields":
			if v == true {
				out[k] = true
			}
		case "anyOf":
			// controller-gen writes int-or-string as anyOf integer, string
			// next to the extension, which says the same.
			if s["x-kubernetes-int-or-string"] != true {
				return nil, fmt.Errorf("%s: anyOf is not supported by the SDK's validator", at)
			}
		case "x-kubernetes-list-type":
			// atomic is a merge strategy; set and map also forbid
			// duplicates, which the validator does not check yet.
			if v != "atomic" {
				return nil, fmt.Errorf("%s: x-kubernetes-list-type %v is not supported by the SDK's validator (duplicates would go unchecked)", at, v)
			}
		default:
			if _, ok := ignored[k]; !ok {
				return nil, fmt.Errorf("%s: keyword %s is not supported by the SDK's validator; support it there or list it as ignored here", at, k)
			}
		}
	}
	if c.defs != nil && out["type"] == "object" && out["properties"] == nil && out["additionalProperties"] == nil && out["x-kubernetes-preserve-unknown-fields"] == nil {
		// The validator takes such an object as closed, refusing every
		// member, as the API server does for a CRD (ServiceL2Status has
		// an empty spec). In Kubernetes' own spec it may instead be a
		// free-form one (RawExtension): say so rather than guess.
		return nil, fmt.Errorf("%s: an object with neither properties nor additionalProperties", at)
	}
	return out, nil
}

// reference resolves a schema that is only a reference: {$ref} or, as
// Kubernetes' v3 spec writes it to attach a default, {allOf: [{$ref}]}.
func (c *converter) reference(s map[string]any, at string) (map[string]any, error) {
	target := s
	if all, ok := s["allOf"].([]any); ok {
		if len(all) != 1 {
			return nil, fmt.Errorf("%s: allOf of %d schemas is not supported", at, len(all))
		}
		target, _ = all[0].(map[string]any)
	}
	ref, ok := target["$ref"].(string)
	if !ok {
		if _, has := s["allOf"]; has {
			return nil, fmt.Errorf("%s: allOf without $ref is not supported", at)
		}
		return nil, nil
	}
	for k := range s {
		if _, ok := ignored[k]; !ok && k != "allOf" && k != "$ref" {
			return nil, fmt.Errorf("%s: %s next to $ref is not supported", at, k)
		}
	}
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok || c.defs[name] == nil {
		return nil, fmt.Errorf("%s: unresolvable $ref %s", at, ref)
	}
	return c.defs[name], nil
}

// celRules keeps of each CEL rule what decides the verdict and the
// message: rule and message (fieldPath and reason only move the error).
// messageExpression and optionalOldSelf change what the API server
// evaluates, so they are refused until the validator supports them.
func celRules(v any, at string) ([]any, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: x-kubernetes-validations is not a list", at)
	}
	var out []any
	for _, r := range list {
		m, _ := r.(map[string]any)
		rule, _ := m["rule"].(string)
		if rule == "" {
			return nil, fmt.Errorf("%s: a CEL rule without rule", at)
		}
		kept := map[string]any{"rule": rule}
		for k, v := range m {
			switch k {
			case "rule", "fieldPath", "reason":
			case "message":
				kept[k] = v
			default:
				return nil, fmt.Errorf("%s: CEL rule field %s is not supported by the SDK's validator", at, k)
			}
		}
		out = append(out, kept)
	}
	return out, nil
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// decode is json.Unmarshal keeping numbers as written (4294967295 stays
// 4294967295).
func decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// moduleDir is the module cache directory of path@version, downloaded if
// needed (in a temporary directory, so no go.mod is involved).
func moduleDir(t *testing.T, path, version string) string {
	t.Helper()
	var m struct{ Dir, Error string }
	out := goOutput(t, os.TempDir(), "mod", "download", "-json", path+"@"+version)
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s", path, version, err, m.Error)
	}
	return m.Dir
}

func goOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
