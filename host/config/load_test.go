package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// layerValues gives, per option, three valid and distinct values: the one
// put in the cloud-config file, the one in the environment and the one on the
// command line. Every option must appear (TestEveryOptionHasLayerValues).
var layerValues = map[string][3]string{
	"apiKey":                       {"file-key", "env-key", "flag-key"},
	"projectID":                    {"p-file", "p-env", "p-flag"},
	"metro":                        {"da", "sv", "ny"},
	"facility":                     {"da11", "sv15", "ny5"},
	"base-url":                     {"http://file.example/metal/v1", "http://env.example/metal/v1", "https://flag.example/metal/v1"},
	"loadbalancer":                 {"metallb:///file-ns", "kube-vip://", "empty://"},
	"localASN":                     {"65001", "65002", "4200000000"},
	"bgpPass":                      {"FilePass123", "EnvPass1234", "FlagPass123"},
	"annotationLocalASN":           {"f.io/{{n}}-asn", "e.io/{{n}}-asn", "g.io/{{n}}-asn"},
	"annotationPeerASN":            {"f.io/{{n}}-peer-asn", "e.io/{{n}}-peer-asn", "g.io/{{n}}-peer-asn"},
	"annotationPeerIP":             {"f.io/{{n}}-peer-ip", "e.io/{{n}}-peer-ip", "g.io/{{n}}-peer-ip"},
	"annotationSrcIP":              {"f.io/{{n}}-src", "e.io/{{n}}-src", "g.io/{{n}}-src"},
	"annotationBGPPass":            {"f.io/{{n}}-pass", "e.io/{{n}}-pass", "g.io/{{n}}-pass"},
	"annotationNetworkIPv4Private": {"f.io/net", "e.io/net", "g.io/net"},
	"annotationEIPMetro":           {"f.io/metro", "e.io/metro", "g.io/metro"},
	"annotationEIPFacility":        {"f.io/facility", "e.io/facility", "g.io/facility"},
	"eipTag":                       {"tag-file", "tag-env", "tag-flag"},
	"apiServerPort":                {"6443", "443", "8443"},
	"bgpNodeSelector":              {"a=b", "c!=d", "e in (f,g)"},
	"eipHealthCheckUseHostIP":      {"true", "false", "true"},
	"policyDir":                    {"/file/policies", "/env/policies", "/flag/policies"},
	"moduleCacheDir":               {"/file/cache", "/env/cache", "/flag/cache"},
	"moduleMemoryLimitMiB":         {"8", "16", "32"},
	"moduleTimeout":                {"1s", "2s", "3s"},
	"apiTimeout":                   {"10s", "20s", "40s"},
	"apiRetries":                   {"1", "2", "3"},
	"apiQPS":                       {"1.5", "2", "3"},
	"apiBurst":                     {"5", "6", "7"},
	"cacheRefreshPeriod":           {"1m0s", "2m0s", "3m0s"},
	"healthCheckInterval":          {"3s", "4s", "5s"},
	"healthCheckTimeout":           {"100ms", "200ms", "300ms"},
	"healthCheckFailures":          {"1", "2", "5"},
	"bgpMaxPrefixes":               {"11", "12", "13"},
	"bgpMaxPrefixesAction":         {"refuse", "warn", "refuse"},
	"bgpHoldTime":                  {"9s", "30s", "3m"},
	"bgpKeepaliveTime":             {"3s", "10s", "1m"},
	"bgpBFDInterval":               {"300ms", "1s", "50ms"},
	"bgpBFDMultiplier":             {"3", "5", "2"},
	"annotateBGPPass":              {"false", "true", "false"},
	"nodeExternalIPv6":             {"true", "false", "true"},
	"orphanEIPs":                   {"release", "report", "release"},
	"orphanEIPGrace":               {"1m", "2m", "3m"},
	"readinessAddress":             {":10270", "127.0.0.1:10271", ":10272"},
}

// layerCompanions are the options an option's layer values need beside
// them to be valid, given in the file layer.
var layerCompanions = map[string]map[string]string{
	"bgpBFDMultiplier": {"bgpBFDInterval": "300ms"},
}

func TestEveryOptionHasLayerValues(t *testing.T) {
	for _, o := range options {
		if _, ok := layerValues[o.key]; !ok {
			t.Errorf("option %s has no layer values in the table test", o.key)
		}
	}
	if len(layerValues) != len(options) {
		t.Errorf("layerValues has %d entries for %d options", len(layerValues), len(options))
	}
}

// fieldText reads the Config field tagged with key, as text comparable
// with the layer values.
func fieldText(t *testing.T, c *Config, key string) string {
	t.Helper()
	rv := reflect.ValueOf(c).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if rv.Type().Field(i).Tag.Get("key") != key {
			continue
		}
		switch v := rv.Field(i).Interface().(type) {
		case Secret:
			return v.Reveal()
		default:
			return fmt.Sprint(v)
		}
	}
	t.Fatalf("no field for %s", key)
	return ""
}

// jsonScalar writes a value the way a user would in cloud-sa.json: numbers
// and booleans unquoted.
func jsonScalar(s string) any {
	if s == "true" || s == "false" {
		return s == "true"
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return n
	}
	return s
}

type layers struct {
	file, env, flag map[string]string
}

func (l layers) sources(t *testing.T) Sources {
	t.Helper()
	src := Sources{Environ: []string{}}
	if l.file != nil {
		m := map[string]any{}
		for k, v := range l.file {
			m[k] = jsonScalar(v)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		src.CloudConfig = b
	}
	for k, v := range l.env {
		o, _ := optionByKey(k)
		src.Environ = append(src.Environ, o.env+"="+v)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddFlags(fs)
	var args []string
	for k, v := range l.flag {
		o, _ := optionByKey(k)
		args = append(args, "--"+o.flag+"="+v)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	src.Flags = fs
	return src
}

// TestLayerPrecedence sets each option in every layer at once and peels the
// layers off from the top: flag > env > file > default.
func TestLayerPrecedence(t *testing.T) {
	for _, o := range options {
		vals := layerValues[o.key]
		type step struct {
			name      string
			l         layers
			want      string
			wantError bool
		}
		full := layers{
			file: map[string]string{o.key: vals[0]},
			env:  map[string]string{o.key: vals[1]},
			flag: map[string]string{o.key: vals[2]},
		}
		steps := []step{
			{name: "flag wins", l: full, want: vals[2]},
			{name: "env wins over file and flag default", l: layers{file: full.file, env: full.env}, want: vals[1]},
			{name: "file wins over flag default", l: layers{file: full.file}, want: vals[0]},
			{name: "default", l: layers{}, want: o.def, wantError: o.required},
		}
		if o.flag == "" { // secrets: no flag layer
			steps = steps[1:]
		}
		for _, s := range steps {
			t.Run(o.key+"/"+s.name, func(t *testing.T) {
				// The other required options come from the file unless under test.
				for _, req := range []string{"apiKey", "projectID"} {
					if req == o.key {
						continue
					}
					if s.l.file == nil {
						s.l.file = map[string]string{}
					}
					s.l.file[req] = "base-" + req
				}
				for k, v := range layerCompanions[o.key] {
					if s.l.file == nil {
						s.l.file = map[string]string{}
					}
					s.l.file[k] = v
				}
				cfg, err := Load(s.l.sources(t))
				if s.wantError {
					if err == nil || !strings.Contains(err.Error(), o.key+" is required") {
						t.Fatalf("want a %q-is-required error, got %v", o.key, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if d, err := time.ParseDuration(s.want); err == nil && strings.ContainsAny(s.want, "smh") {
					s.want = d.String() // "5m" and "5m0s" are the same setting
				}
				if got := fieldText(t, cfg, o.key); got != s.want {
					t.Fatalf("got %q, want %q", got, s.want)
				}
			})
		}
	}
}

// TestExplicitFlagEqualToDefaultStillWins: giving a flag its default value
// on purpose is still a flag.
func TestExplicitFlagEqualToDefaultStillWins(t *testing.T) {
	l := layers{
		file: map[string]string{"apiKey": "k", "projectID": "p"},
		env:  map[string]string{"localASN": "65010"},
		flag: map[string]string{"localASN": "65000"},
	}
	cfg, err := Load(l.sources(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LocalASN != 65000 {
		t.Fatalf("localASN = %d, want the flag's 65000", cfg.LocalASN)
	}
}

func TestEmptyEnvIsUnset(t *testing.T) {
	src := Sources{
		CloudConfig: []byte(`{"apiKey":"k","projectID":"p","eipTag":"from-file"}`),
		Environ:     []string{"METAL_EIP_TAG=", "METAL_PROJECT_ID="},
	}
	cfg, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.EIPTag != "from-file" || cfg.ProjectID != "p" {
		t.Fatalf("empty env overrode the file: eipTag=%q projectID=%q", cfg.EIPTag, cfg.ProjectID)
	}
}

func TestCloudConfigNamesAreCaseInsensitive(t *testing.T) {
	src := Sources{
		CloudConfig: []byte(`{"APIKEY":"k","projectId":"p","LocalAsn":65123,"EIPTAG":"t","Base-URL":"http://x.example"}`),
		Environ:     []string{},
	}
	cfg, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.APIKey.Reveal() != "k" || cfg.ProjectID != "p" || cfg.LocalASN != 65123 || cfg.EIPTag != "t" || cfg.BaseURL != "http://x.example" {
		t.Fatalf("unexpected config %+v", cfg)
	}
}

// TestIgnoredSettingsWarn: upstream's loadBalancerID (the ID of an Equinix
// Metal Load Balancer, which this CCM does not drive) is ignored with a
// warning whichever way it is given, and the warning says where to look.
func TestIgnoredSettingsWarn(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		environ []string
		want    string // in the one warning; "" wants none
	}{
		{name: "cloud-config field", file: `{"apiKey":"k","projectID":"p","loadBalancerID":"x"}`, want: `"loadBalancerID"`},
		{name: "environment variable", file: `{"apiKey":"k","projectID":"p"}`, environ: []string{"METAL_LOAD_BALANCER_ID=x"}, want: "METAL_LOAD_BALANCER_ID"},
		// Upstream treats an empty variable as unset, so does every other
		// variable here.
		{name: "empty environment variable", file: `{"apiKey":"k","projectID":"p"}`, environ: []string{"METAL_LOAD_BALANCER_ID="}},
		// Other programs' METAL_* variables (the metal CLI's token) are not
		// this CCM's to judge: plan runs in a user's shell.
		{name: "another program's variable", file: `{"apiKey":"k","projectID":"p"}`, environ: []string{"METAL_AUTH_TOKEN=t"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			environ := tc.environ
			if environ == nil {
				environ = []string{}
			}
			cfg, err := Load(Sources{CloudConfig: []byte(tc.file), Environ: environ})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if len(cfg.Warnings) != 0 {
					t.Fatalf("warnings = %q, want none", cfg.Warnings)
				}
				return
			}
			if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], tc.want) || !strings.Contains(cfg.Warnings[0], "ignored") || !strings.Contains(cfg.Warnings[0], "docs/reference/configuration.md") {
				t.Fatalf("warnings = %q, want one naming %s", cfg.Warnings, tc.want)
			}
		})
	}
}

func TestEnvAndJSONTyping(t *testing.T) {
	cfg, err := Load(Sources{
		CloudConfig: []byte(`{"apiKey":"k","projectID":"p","apiServerPort":"6443","eipHealthCheckUseHostIP":"true"}`),
		Environ:     []string{"METAL_LOCAL_ASN=65100", "METAL_EIP_HEALTH_CHECK_USE_HOST_IP=1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.APIServerPort != 6443 || !cfg.EIPHealthCheckUseHostIP || cfg.LocalASN != 65100 {
		t.Fatalf("unexpected %+v", cfg)
	}
	if !cfg.NodeSelector.Empty() {
		t.Fatalf("empty bgpNodeSelector must select every node, got %v", cfg.NodeSelector)
	}
}
