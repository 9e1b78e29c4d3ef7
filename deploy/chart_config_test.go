package deploy_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
)

// ccmKeys are the cloud-sa.json fields the CCM reads, with the Go type of
// each, from host/config's own definition: the key tags of config.Config,
// by which config.Load decodes every option into its field.
func ccmKeys(t *testing.T) map[string]reflect.Type {
	t.Helper()
	keys := map[string]reflect.Type{}
	rt := reflect.TypeFor[config.Config]()
	for i := 0; i < rt.NumField(); i++ {
		if key := rt.Field(i).Tag.Get("key"); key != "" {
			keys[key] = rt.Field(i).Type
		}
	}
	if len(keys) == 0 {
		t.Fatal("config.Config has no field with a key tag")
	}
	return keys
}

// knownToLoad reports whether config.Load reads key from the cloud-config
// file: a known field with a value that is no scalar is refused, naming the
// field; an unknown field is only warned about.
func knownToLoad(t *testing.T, key string) bool {
	t.Helper()
	b, err := json.Marshal(map[string]any{"apiKey": "k", "projectID": "p", key: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Sources{Environ: []string{}, CloudConfig: b})
	if err != nil {
		return strings.Contains(err.Error(), key+" (cloud-config field ")
	}
	if !slices.ContainsFunc(cfg.Warnings, func(w string) bool { return strings.Contains(w, strconv.Quote(key)) }) {
		t.Fatalf("config.Load neither refused nor warned about the field %q set to an object", key)
	}
	return false
}

// chartSchema is deploy/chart/values.schema.json.
type chartSchema struct {
	Properties map[string]struct {
		Properties           map[string]map[string]any `json:"properties"`
		AdditionalProperties json.RawMessage           `json:"additionalProperties"`
	} `json:"properties"`
}

func loadChartSchema(t *testing.T) chartSchema {
	t.Helper()
	b, err := os.ReadFile(deploy.ChartDir + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s chartSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// schemaTypes is a property's "type", as a list.
func schemaTypes(p map[string]any) []string {
	switch v := p["type"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			s, _ := x.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// TestChartSchemaConfigKeys: the config object of values.schema.json (the
// chart writes it as it is into cloud-sa.json) lists exactly the fields the
// CCM reads from cloud-sa.json, each with a type the CCM can parse into its
// field and a description, and refuses any other: a misspelt field would
// otherwise reach the CCM, which only warns about it and runs without it.
func TestChartSchemaConfigKeys(t *testing.T) {
	want := ccmKeys(t)
	for key := range want {
		if !knownToLoad(t, key) {
			t.Errorf("config.Config's key %q is not a field config.Load reads from the cloud-config file", key)
		}
	}
	cfg, ok := loadChartSchema(t).Properties["config"]
	if !ok {
		t.Fatal("values.schema.json has no config")
	}
	if string(cfg.AdditionalProperties) != "false" {
		t.Error("values.schema.json: config lacks additionalProperties: false, so a misspelt field passes")
	}
	var missing, extra []string
	for key := range want {
		if _, ok := cfg.Properties[key]; !ok {
			missing = append(missing, key)
		}
	}
	for key := range cfg.Properties {
		if _, ok := want[key]; !ok {
			extra = append(extra, key)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("values.schema.json: config lacks %d field(s) the CCM reads from cloud-sa.json: %s", len(missing), strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		t.Errorf("values.schema.json: config has %d field(s) the CCM does not read: %s", len(extra), strings.Join(extra, ", "))
	}

	// The JSON type each Go type is parsed from; a string form (as in an
	// environment variable) is accepted too, for every type.
	jsonType := map[reflect.Type]string{
		reflect.TypeFor[config.Secret](): "string",
		reflect.TypeFor[string]():        "string",
		reflect.TypeFor[time.Duration](): "string",
		reflect.TypeFor[bool]():          "boolean",
		reflect.TypeFor[int]():           "integer",
		reflect.TypeFor[uint32]():        "integer",
		reflect.TypeFor[float64]():       "number",
	}
	for key, typ := range want {
		p, ok := cfg.Properties[key]
		if !ok {
			continue
		}
		if d, _ := p["description"].(string); strings.TrimSpace(d) == "" {
			t.Errorf("values.schema.json: config.%s has no description", key)
		}
		jt, ok := jsonType[typ]
		if !ok {
			t.Errorf("config.%s: no JSON type known for its Go type %s (add it to this test)", key, typ)
			continue
		}
		types := schemaTypes(p)
		if enum, isEnum := p["enum"].([]any); isEnum && types == nil && jt == "string" {
			for _, v := range enum {
				if _, ok := v.(string); !ok {
					t.Errorf("values.schema.json: config.%s has the non-string %v in its enum; the CCM's field is a %s", key, v, typ)
				}
			}
			continue
		}
		if !slices.Contains(types, jt) {
			t.Errorf("values.schema.json: config.%s has type %v, want %q (the CCM's field is a %s)", key, types, jt, typ)
		}
		for _, other := range types {
			if other != jt && other != "string" {
				t.Errorf("values.schema.json: config.%s allows %q, which the CCM cannot parse into a %s", key, other, typ)
			}
		}
	}
}

// ccmFlagKeys maps each flag of config.AddFlags (--metal-<name>) to its
// cloud-sa.json field, by name: the flag is the field's name in lower case
// with a hyphen between words (projectID: --metal-project-id). The mapping
// is checked to be one to one.
func ccmFlagKeys(t *testing.T) map[string]string {
	t.Helper()
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "")) }
	byNorm := map[string]string{}
	for key := range ccmKeys(t) {
		byNorm[norm(key)] = key
	}
	fs := pflag.NewFlagSet("ccm", pflag.ContinueOnError)
	config.AddFlags(fs)
	out := map[string]string{}
	seen := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		key, ok := byNorm[norm(strings.TrimPrefix(f.Name, "metal-"))]
		if !ok {
			t.Errorf("--%s matches no cloud-sa.json field by name; teach ccmFlagKeys the mapping", f.Name)
			return
		}
		if other, dup := seen[key]; dup {
			t.Errorf("--%s and --%s both match the field %s", f.Name, other, key)
		}
		seen[key] = f.Name
		out[f.Name] = key
	})
	if len(out) == 0 {
		t.Fatal("config.AddFlags registered no flag")
	}
	return out
}

// chartSetFlags are the config flags the chart's Deployment sets (its
// --metal-* args), as flag name → value.
func chartSetFlags(t *testing.T) map[string]string {
	t.Helper()
	d := find(renderChart(t, required()), "Deployment", deploy.Namespace, "cloud-provider-equinix-metal")
	if d == nil {
		t.Fatal("no Deployment")
	}
	args, _ := container(t, d)["args"].([]any)
	out := map[string]string{}
	for _, a := range args {
		s, _ := a.(string)
		if name, value, ok := strings.Cut(strings.TrimPrefix(s, "--"), "="); ok && strings.HasPrefix(s, "--metal-") {
			out[name] = value
		}
	}
	return out
}

// TestChartConfigSetByChart: a cloud-sa.json field whose flag the chart sets
// (a flag wins over cloud-sa.json) is refused under config, naming it and
// what to set instead, rather than ignored.
func TestChartConfigSetByChart(t *testing.T) {
	flagKeys := ccmFlagKeys(t)
	set := chartSetFlags(t)
	if len(set) == 0 {
		t.Fatal("the Deployment sets no --metal-* flag")
	}
	ch, err := deploycheck.LoadChart(deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	for flag, value := range set {
		key, ok := flagKeys[flag]
		if !ok {
			t.Errorf("the Deployment sets --%s, which is no flag of config.AddFlags", flag)
			continue
		}
		// The chart's own value: valid, so the schema lets it through and
		// the template has to refuse it.
		values := required()
		values["config"].(map[string]any)[key] = value
		_, err := deploycheck.RenderChart(ch, values, deploy.Namespace)
		if err == nil || !strings.Contains(err.Error(), "config."+key+" is set by the chart as --"+flag+",") {
			t.Errorf("config.%s (set by the chart as --%s=%s): err = %v, want a refusal naming config.%s and --%s", key, flag, value, err, key, flag)
		}
	}
}

// TestChartConfigDefaults: every field the chart lets through takes the
// CCM's own default, written as a user would (a string, as in METAL_*) and
// in its JSON type: the schema's types and patterns refuse nothing valid.
func TestChartConfigDefaults(t *testing.T) {
	types := ccmKeys(t)
	flagKeys := ccmFlagKeys(t)
	set := chartSetFlags(t)
	fs := pflag.NewFlagSet("ccm", pflag.ContinueOnError)
	config.AddFlags(fs)
	asText, typed := required(), required()
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if _, bySet := set[f.Name]; bySet {
			return
		}
		key := flagKeys[f.Name]
		if _, required := asText["config"].(map[string]any)[key]; required {
			return // no default: set by required()
		}
		asText["config"].(map[string]any)[key] = f.DefValue
		var v any = f.DefValue
		switch types[key].Kind() {
		case reflect.Bool:
			v = f.DefValue == "true"
		case reflect.Int, reflect.Uint32, reflect.Float64:
			x, err := strconv.ParseFloat(f.DefValue, 64)
			if err != nil {
				t.Fatalf("--%s: default %q: %v", f.Name, f.DefValue, err)
			}
			v = x
		}
		typed["config"].(map[string]any)[key] = v
		n++
	})
	for name, values := range map[string]map[string]any{"as text": asText, "typed": typed} {
		objs := renderChart(t, values)
		file, raw := cloudSAJSON(t, objs)
		if len(file) != n+2 {
			t.Errorf("%s: cloud-sa.json has %d fields, want %d: %s", name, len(file), n+2, raw)
		}
		cfg, err := config.Load(config.Sources{Environ: []string{}, CloudConfig: raw})
		if err != nil {
			t.Errorf("%s: the CCM refuses the rendered cloud-sa.json: %v", name, err)
			continue
		}
		if len(cfg.Warnings) > 0 {
			t.Errorf("%s: the CCM warns about the rendered cloud-sa.json: %v", name, cfg.Warnings)
		}
	}
}
