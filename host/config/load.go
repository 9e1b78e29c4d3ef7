package config

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	kjson "github.com/knadh/koanf/parsers/json"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// Sources are the inputs of Load. Everything is explicit so that tests can
// run in parallel without touching the process environment.
type Sources struct {
	// Flags is the parsed flag set that AddFlags registered into; nil means
	// no flags were given.
	Flags *pflag.FlagSet
	// Environ lists KEY=VALUE pairs; nil means os.Environ().
	Environ []string
	// CloudConfig is the content of the --cloud-config file; nil means none.
	CloudConfig []byte
	// CloudConfigPath names the file in messages.
	CloudConfigPath string
}

// ReadCloudConfig reads the --cloud-config file. An empty path is allowed:
// everything can come from env and flags.
func ReadCloudConfig(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the cloud-config file: %w; check --cloud-config and that the Secret is mounted", err)
	}
	return b, nil
}

// Load merges the four layers (flag > env > file > default) and validates
// the result. The error, if any, names every problem, one per line.
func Load(src Sources) (*Config, error) {
	l := &loader{
		k:        koanf.New("\x00"), // keys are flat; no delimiter may split "base-url"
		fileKeys: map[string]bool{},
		envKeys:  map[string]string{},
		flagKeys: map[string]string{},
		failed:   map[string]bool{},
	}
	l.loadDefaults()
	l.loadFile(src.CloudConfig, src.CloudConfigPath)
	l.loadEnv(src.Environ)
	l.loadFlags(src.Flags)
	cfg := l.decode()
	problems := append(l.problems, validate(cfg, l.source, l.failed)...)
	if len(problems) > 0 {
		return nil, &validationError{Problems: problems}
	}
	cfg.Warnings = l.warnings
	return cfg, nil
}

// loader merges the layers into one koanf tree and remembers which layer
// set each key, so a problem names where its value came from.
type loader struct {
	k                  *koanf.Koanf
	problems, warnings []string
	fileKeys           map[string]bool   // keys the cloud-config file sets
	envKeys            map[string]string // key -> env name
	flagKeys           map[string]string // key -> flag name
	failed             map[string]bool   // keys whose value did not parse: no second complaint
}

func (l *loader) loadDefaults() {
	defaults := map[string]any{}
	for _, o := range options {
		defaults[o.key] = o.def
	}
	_ = l.k.Load(confmap.Provider(defaults, ""), nil) // a map provider cannot fail
}

func (l *loader) loadFile(b []byte, path string) {
	if b == nil {
		return
	}
	m, unknown, err := parseCloudConfig(b)
	if err != nil {
		where := "the cloud-config file"
		if path != "" {
			where = fmt.Sprintf("the cloud-config file %s", path)
		}
		l.problems = append(l.problems, fmt.Sprintf("%s is not a JSON object: %v", where, err))
		return
	}
	for key := range m {
		l.fileKeys[key] = true
	}
	_ = l.k.Load(confmap.Provider(m, ""), nil)
	if len(unknown) > 0 {
		// Upstream ignored unknown fields; a Secret written for it may
		// carry some, so this warns instead of refusing to start.
		l.warnings = append(l.warnings, fmt.Sprintf("the cloud-config file has unknown field(s) %s, which are ignored; the known fields are listed in docs/reference/configuration.md", strings.Join(unknown, ", ")))
	}
}

// ignoredEnv are the variables upstream read that this CCM does not. They
// are warned about as an unknown cloud-config field is (loadFile), but an
// unknown METAL_* variable in general is not: other programs read that
// prefix too (the metal CLI's METAL_AUTH_TOKEN, METAL_CONFIG), and plan runs
// in a user's shell, so only a setting meant for upstream is a mistake.
var ignoredEnv = map[string]bool{
	// upstream's loadBalancerID: an Equinix Metal Load Balancer (EMLB)
	// for the control plane, which this CCM does not drive.
	"METAL_LOAD_BALANCER_ID": true,
}

// loadEnv reads the METAL_* variables of environ (nil: the process's).
func (l *loader) loadEnv(environ []string) {
	if environ == nil {
		environ = os.Environ()
	}
	envToKey := map[string]string{}
	for _, o := range options {
		if o.env != "" {
			envToKey[o.env] = o.key
		}
	}
	var ignored []string
	_ = l.k.Load(env.Provider("\x00", env.Opt{
		Prefix:      "METAL_",
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			if value == "" { // upstream treats an empty variable as unset
				return "", nil
			}
			key, ok := envToKey[name]
			if !ok {
				if ignoredEnv[name] {
					ignored = append(ignored, name)
				}
				return "", nil
			}
			l.envKeys[key] = name
			return key, value
		},
	}), nil)
	if len(ignored) > 0 {
		sort.Strings(ignored)
		l.warnings = append(l.warnings, fmt.Sprintf("the environment variable(s) %s, which upstream read, are ignored by this CCM; the known variables are listed in docs/reference/configuration.md", strings.Join(ignored, ", ")))
	}
}

func (l *loader) loadFlags(flags *pflag.FlagSet) {
	if flags == nil {
		return
	}
	flagToKey := map[string]string{}
	for _, o := range options {
		if o.flag != "" {
			flagToKey[o.flag] = o.key
		}
	}
	_ = l.k.Load(posflag.ProviderWithFlag(flags, "\x00", l.k, func(f *pflag.Flag) (string, any) {
		key, ok := flagToKey[f.Name]
		if !ok {
			return "", nil
		}
		if f.Changed {
			l.flagKeys[key] = f.Name
		}
		return key, f.Value.String()
	}), nil)
}

// source names the layer an option's value came from.
func (l *loader) source(o option) string {
	switch {
	case l.flagKeys[o.key] != "":
		return "flag --" + l.flagKeys[o.key]
	case l.envKeys[o.key] != "":
		return "env " + l.envKeys[o.key]
	case l.fileKeys[o.key]:
		return fmt.Sprintf("cloud-config field %q", o.key)
	default:
		return "default"
	}
}

// decode parses every option into its Config field (by the field's key
// tag); a value that does not parse is a problem, with secrets redacted.
func (l *loader) decode() *Config {
	cfg := &Config{}
	rv := reflect.ValueOf(cfg).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		key := rt.Field(i).Tag.Get("key")
		if key == "" {
			continue
		}
		o, ok := optionByKey(key)
		if !ok {
			panic("config: field " + rt.Field(i).Name + " has no option " + key)
		}
		raw := l.k.Get(key)
		if err := assign(rv.Field(i), raw); err != nil {
			shown := fmt.Sprintf("%v", raw)
			if o.secret {
				shown = redacted
			}
			l.problems = append(l.problems, fmt.Sprintf("%s (%s): %q %v", o.key, l.source(o), shown, err))
			l.failed[o.key] = true
		}
	}
	return cfg
}

// parseCloudConfig decodes cloud-sa.json and maps its field names onto the
// canonical keys case-insensitively, as upstream's encoding/json did.
func parseCloudConfig(b []byte) (map[string]any, []string, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return map[string]any{}, nil, nil
	}
	raw, err := kjson.Parser().Unmarshal(b)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]any{}
	var unknown []string
	for name, v := range raw {
		matched := false
		for _, o := range options {
			if strings.EqualFold(name, o.key) {
				out[o.key] = v
				matched = true
				break
			}
		}
		if !matched {
			unknown = append(unknown, strconv.Quote(name))
		}
	}
	sort.Strings(unknown)
	return out, unknown, nil
}

// assign converts one layered value (a string from env/flag/default, or a
// JSON scalar from the file) into the field's type.
func assign(f reflect.Value, raw any) error {
	s, isString := raw.(string)
	if !isString {
		switch v := raw.(type) {
		case nil:
			s = ""
		case float64: // JSON numbers
			if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
				s = strconv.FormatInt(int64(v), 10)
			} else {
				s = strconv.FormatFloat(v, 'f', -1, 64)
			}
		case bool:
			s = strconv.FormatBool(v)
		default:
			return fmt.Errorf("must be a string, number or boolean, not %T", raw)
		}
	}
	s = strings.TrimSpace(s)

	switch f.Interface().(type) {
	case Secret:
		f.Set(reflect.ValueOf(Secret(s)))
	case string:
		f.SetString(s)
	case bool:
		if s == "" {
			f.SetBool(false)
			return nil
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("is not a boolean; use true or false")
		}
		f.SetBool(b)
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("is not a duration; use a number with a unit, for example 500ms, 2s or 5m")
		}
		f.SetInt(int64(d))
	case uint32:
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("is not a whole number between 0 and %d", uint32(math.MaxUint32))
		}
		f.SetUint(n)
	case int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("is not a whole number")
		}
		f.SetInt(int64(n))
	case float64:
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return fmt.Errorf("is not a number")
		}
		f.SetFloat(n)
	default:
		panic("config: unsupported field type " + f.Type().String())
	}
	return nil
}

// validationError lists every problem found, so a user fixes them all in
// one round instead of one restart per mistake.
type validationError struct {
	Problems []string
}

func (e *validationError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid configuration: " + e.Problems[0]
	}
	return fmt.Sprintf("invalid configuration, %d problems: %s", len(e.Problems), strings.Join(e.Problems, "; "))
}
