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

// builtinKinds are the built-in kinds the SDK knows the schema of: every
// kind of Kubernetes' GA API groups that a module can apply, from
// Kubernetes' OpenAPI v3 spec (one file per group and version). Left out:
// the kinds that are requests rather than stored objects (reviews, token
// requests, Scale, Binding, Eviction), CustomResourceDefinition (its
// schema is recursive, which the SDK's tree of schemas cannot hold), and
// the alpha and beta versions. The host lets a module write a kind outside
// this list; it gets the checks that hold for every kind only.
var builtinKinds = []struct{ apiVersion, kind string }{
	{"v1", "ConfigMap"},
	{"v1", "Endpoints"},
	{"v1", "LimitRange"},
	{"v1", "Namespace"},
	{"v1", "Node"},
	{"v1", "PersistentVolume"},
	{"v1", "PersistentVolumeClaim"},
	{"v1", "Pod"},
	{"v1", "PodTemplate"},
	{"v1", "ReplicationController"},
	{"v1", "ResourceQuota"},
	{"v1", "Secret"},
	{"v1", "Service"},
	{"v1", "ServiceAccount"},
	{"admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"},
	{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"},
	{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"},
	{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"},
	{"apps/v1", "ControllerRevision"},
	{"apps/v1", "DaemonSet"},
	{"apps/v1", "Deployment"},
	{"apps/v1", "ReplicaSet"},
	{"apps/v1", "StatefulSet"},
	{"autoscaling/v2", "HorizontalPodAutoscaler"},
	{"batch/v1", "CronJob"},
	{"batch/v1", "Job"},
	{"certificates.k8s.io/v1", "CertificateSigningRequest"},
	{"coordination.k8s.io/v1", "Lease"},
	{"discovery.k8s.io/v1", "EndpointSlice"},
	{"events.k8s.io/v1", "Event"},
	{"flowcontrol.apiserver.k8s.io/v1", "FlowSchema"},
	{"flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"},
	{"networking.k8s.io/v1", "IPAddress"},
	{"networking.k8s.io/v1", "Ingress"},
	{"networking.k8s.io/v1", "IngressClass"},
	{"networking.k8s.io/v1", "NetworkPolicy"},
	{"networking.k8s.io/v1", "ServiceCIDR"},
	{"node.k8s.io/v1", "RuntimeClass"},
	{"policy/v1", "PodDisruptionBudget"},
	{"rbac.authorization.k8s.io/v1", "ClusterRole"},
	{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"},
	{"rbac.authorization.k8s.io/v1", "Role"},
	{"rbac.authorization.k8s.io/v1", "RoleBinding"},
	{"scheduling.k8s.io/v1", "PriorityClass"},
	{"storage.k8s.io/v1", "CSIDriver"},
	{"storage.k8s.io/v1", "CSINode"},
	{"storage.k8s.io/v1", "StorageClass"},
	{"storage.k8s.io/v1", "VolumeAttachment"},
}

// TestSchemasUpToDate generates the SDK's schemas from their sources and
// fails if the embedded ones differ: Kubernetes' OpenAPI v3 spec as
// published in k8s.io/kubernetes at the release of the k8s.io/api in
// go.mod, and every CRD of the MetalLB version go.mod pins (the CRDs
// test/testenv installs). Both come from the module cache (go mod download
// fetches them if needed). Each kind is a file of its own, named after it
// (schemaFileName), so that the SDK reads only the kinds a module writes.
func TestSchemasUpToDate(t *testing.T) {
	want := map[string][]byte{}
	for _, f := range []schemaFile{kubernetesSchemas(t), metallbSchemas(t)} {
		for _, k := range f.Kinds {
			b, err := json.MarshalIndent(schemaFile{Source: f.Source, Kinds: []schemaKind{k}}, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			want[schemaFileName(k.APIVersion, k.Kind)] = append(b, '\n')
		}
	}
	have, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range have {
		if _, ok := want[filepath.Base(p)]; ok {
			continue
		}
		if *update {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is no kind's schema any more; run go test ./hack/sdkschema -update and commit the result", p)
	}
	for name, got := range want {
		path := filepath.Join(schemaDir, name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v; run go test ./hack/sdkschema -update", err)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s is not what its source generates; run go test ./hack/sdkschema -update and commit the result", path)
		}
	}
}

// schemaFileName is the file of one kind's schema: its apiVersion with
// "_" for "/" (a group name has no "_"), "_", its kind: v1_ConfigMap.json,
// metallb.io_v1beta2_BGPPeer.json. The SDK reads the key from the name.
func schemaFileName(apiVersion, kind string) string {
	return strings.ReplaceAll(apiVersion, "/", "_") + "_" + kind + ".json"
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
	const specDir = "api/openapi-spec/v3"
	f := schemaFile{Source: "k8s.io/kubernetes@" + version + " " + specDir}
	specs := map[string]map[string]map[string]any{} // by file
	for _, k := range builtinKinds {
		// api__v1_openapi.json, apis__apps__v1_openapi.json
		spec := "api__v1_openapi.json"
		if group, v, ok := strings.Cut(k.apiVersion, "/"); ok {
			spec = "apis__" + group + "__" + v + "_openapi.json"
		}
		defs, ok := specs[spec]
		if !ok {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(specDir), spec))
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
			defs = doc.Components.Schemas
			specs[spec] = defs
		}
		name := definitionOf(defs, k.apiVersion, k.kind)
		if name == "" {
			t.Fatalf("%s has no schema of %s %s", spec, k.apiVersion, k.kind)
		}
		c := converter{defs: defs, builtin: true}
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
	defs map[string]map[string]any // for $ref
	// builtin: Kubernetes' own spec, whose kinds the API server decodes
	// into Go structs (an integer's format is the Go field's range; an
	// object without properties is free-form), not a CRD's.
	builtin bool
	depth   int
}

// namedTypes are apimachinery's types that the API server decodes
// themselves, by the $ref that names them: their schema says less than the
// decoding checks.
var namedTypes = map[string]map[string]any{
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       {"type": "string", "format": "date-time"},
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":  {"type": "string", "format": "micro-time"},
	"io.k8s.apimachinery.pkg.api.resource.Quantity":   {"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}, "format": "quantity"},
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"x-kubernetes-int-or-string": true},
	// Free-form: any JSON (RawExtension's object, JSON's value).
	"io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
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
	"x-kubernetes-unions":             "a union's one-member rule is the API server's own validation of the kind, not a schema check",
}

func (c *converter) convert(s map[string]any, at string) (map[string]any, error) {
	if c.depth > 64 {
		return nil, fmt.Errorf("%s: nested more than 64 deep (a recursive schema?)", at)
	}
	c.depth++
	defer func() { c.depth-- }()
	if ref, name, err := c.reference(s, at); err != nil || ref != nil {
		if err != nil {
			return nil, err
		}
		out, ok := namedTypes[name]
		if !ok {
			var err error
			if out, err = c.convert(ref, at); err != nil {
				return nil, err
			}
		}
		if d, ok := s["default"]; ok {
			// Kubernetes' spec attaches a default to a reference.
			out = clone(out)
			out["default"] = d
		}
		return out, nil
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
			case c.builtin && s["type"] == "integer" && (v == "int32" || v == "int64"):
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
			// duplicates.
			switch v {
			case "atomic":
			case "set", "map":
				out[k] = v
			default:
				return nil, fmt.Errorf("%s: x-kubernetes-list-type %v is not supported by the SDK's validator", at, v)
			}
		case "x-kubernetes-list-map-keys":
			out[k] = v
		default:
			if _, ok := ignored[k]; !ok {
				return nil, fmt.Errorf("%s: keyword %s is not supported by the SDK's validator; support it there or list it as ignored here", at, k)
			}
		}
	}
	if c.defs != nil && out["type"] == "object" && out["properties"] == nil && out["additionalProperties"] == nil && out["x-kubernetes-preserve-unknown-fields"] == nil {
		if c.builtin {
			// Kubernetes' spec writes a free-form object so (a Go
			// map or struct the schema does not describe).
			out["x-kubernetes-preserve-unknown-fields"] = true
			return out, nil
		}
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
func (c *converter) reference(s map[string]any, at string) (map[string]any, string, error) {
	target := s
	if all, ok := s["allOf"].([]any); ok {
		if len(all) != 1 {
			return nil, "", fmt.Errorf("%s: allOf of %d schemas is not supported", at, len(all))
		}
		target, _ = all[0].(map[string]any)
	}
	ref, ok := target["$ref"].(string)
	if !ok {
		if _, has := s["allOf"]; has {
			return nil, "", fmt.Errorf("%s: allOf without $ref is not supported", at)
		}
		return nil, "", nil
	}
	for k := range s {
		if _, ok := ignored[k]; !ok && k != "allOf" && k != "$ref" && k != "default" {
			return nil, "", fmt.Errorf("%s: %s next to $ref is not supported", at, k)
		}
	}
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok || c.defs[name] == nil {
		return nil, "", fmt.Errorf("%s: unresolvable $ref %s", at, ref)
	}
	return c.defs[name], name, nil
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
