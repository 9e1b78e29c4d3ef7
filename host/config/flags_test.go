package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func newFlags(t *testing.T) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddFlags(fs)
	return fs
}

// TestFlagTypes: every flag has the pflag type of its option's Config
// field, and --help shows it.
func TestFlagTypes(t *testing.T) {
	fs := newFlags(t)
	want := map[reflect.Type]string{
		reflect.TypeFor[string](): "string", reflect.TypeFor[bool](): "bool", reflect.TypeFor[int](): "int",
		reflect.TypeFor[uint32](): "uint32", reflect.TypeFor[float64](): "float64", reflect.TypeFor[time.Duration](): "duration",
	}
	fields := fieldTypes()
	for _, o := range options {
		if o.flag == "" {
			continue
		}
		f := fs.Lookup(o.flag)
		if f == nil {
			t.Errorf("option %s: no flag --%s", o.key, o.flag)
			continue
		}
		if got := f.Value.Type(); got != want[fields[o.key]] {
			t.Errorf("--%s is of type %q, want %q (its field is a %s)", o.flag, got, want[fields[o.key]], fields[o.key])
		}
	}

	usage := fs.FlagUsages()
	for _, line := range []string{
		"--metal-api-qps float ",
		"--metal-api-retries int ",
		"--metal-local-asn uint32 ",
		"--metal-module-timeout duration ",
		"--metal-project-id string ",
	} {
		if !strings.Contains(usage, line) {
			t.Errorf("--help lacks %q", line)
		}
	}
	for _, text := range []string{"(default 20)", "(default 15s)", "(default true)"} {
		if !strings.Contains(usage, text) {
			t.Errorf("--help lacks %q: a typed default is shown unquoted", text)
		}
	}
	for _, line := range strings.Split(usage, "\n") {
		// A bool flag's usage follows its name: it takes no value.
		if f := strings.Fields(line); len(f) > 1 && f[0] == "--metal-annotate-bgp-pass" && f[1] != "write" {
			t.Errorf("the bool flag shows a value to give: %q", line)
		}
	}
}

// TestTypedGetters: pflag's typed getters read the flags, so they are typed
// for any code that looks them up, not only for --help.
func TestTypedGetters(t *testing.T) {
	fs := newFlags(t)
	if err := fs.Parse([]string{"--metal-module-timeout=2s", "--metal-api-qps=1.5", "--metal-api-retries=7", "--metal-eip-health-check-use-host-ip"}); err != nil {
		t.Fatal(err)
	}
	if d, err := fs.GetDuration("metal-module-timeout"); err != nil || d != 2*time.Second {
		t.Errorf("GetDuration = %v, %v; want 2s", d, err)
	}
	if d, err := fs.GetDuration("metal-cache-refresh-period"); err != nil || d != 5*time.Minute {
		t.Errorf("GetDuration of the default = %v, %v; want 5m", d, err)
	}
	if q, err := fs.GetFloat64("metal-api-qps"); err != nil || q != 1.5 {
		t.Errorf("GetFloat64 = %v, %v; want 1.5", q, err)
	}
	if n, err := fs.GetInt("metal-api-retries"); err != nil || n != 7 {
		t.Errorf("GetInt = %v, %v; want 7", n, err)
	}
	if b, err := fs.GetBool("metal-eip-health-check-use-host-ip"); err != nil || !b {
		t.Errorf("GetBool = %v, %v; want true", b, err)
	}
	if n, err := fs.GetUint32("metal-local-asn"); err != nil || n != 65000 {
		t.Errorf("GetUint32 of the default = %v, %v; want 65000", n, err)
	}
}

// TestBoolFlagAlone: a bool flag alone means true, =false still sets false,
// and either is the flag layer, over env and the cloud-config.
func TestBoolFlagAlone(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--metal-eip-health-check-use-host-ip"}, true},
		{[]string{"--metal-eip-health-check-use-host-ip=true"}, true},
		{[]string{"--metal-eip-health-check-use-host-ip=false"}, false},
		{nil, false}, // env says false and the file true: env wins
	} {
		fs := newFlags(t)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		cfg, err := Load(Sources{
			Flags:       fs,
			CloudConfig: []byte(`{"apiKey":"k","projectID":"p","eipHealthCheckUseHostIP":true}`),
			Environ:     []string{"METAL_EIP_HEALTH_CHECK_USE_HOST_IP=false"},
		})
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.EIPHealthCheckUseHostIP != tc.want {
			t.Errorf("%q: eipHealthCheckUseHostIP = %v, want %v", tc.args, cfg.EIPHealthCheckUseHostIP, tc.want)
		}
	}
}

// TestFlagValueErrors: a flag value that does not parse is refused by
// pflag, and FlagError words it exactly as Load words the same value from
// the environment, with the flag as its source: the option, where the value
// came from, and what a valid value looks like.
func TestFlagValueErrors(t *testing.T) {
	bad := map[reflect.Type]string{
		reflect.TypeFor[bool]():          "maybe",
		reflect.TypeFor[int]():           "abc",
		reflect.TypeFor[uint32]():        "-1",
		reflect.TypeFor[float64]():       "abc",
		reflect.TypeFor[time.Duration](): "5",
	}
	fields := fieldTypes()
	tested := 0
	for _, o := range options {
		value, ok := bad[fields[o.key]]
		if o.flag == "" || !ok {
			continue // any string parses
		}
		tested++
		fs := newFlags(t)
		parseErr := fs.Parse([]string{"--" + o.flag + "=" + value})
		if parseErr == nil {
			t.Errorf("--%s=%s was accepted", o.flag, value)
			continue
		}
		got := FlagError(parseErr)
		if got == nil {
			t.Errorf("--%s=%s: FlagError(%v) = nil", o.flag, value, parseErr)
			continue
		}
		var ve *validationError
		if !errors.As(got, &ve) {
			t.Errorf("--%s: FlagError gave a %T, want a *ValidationError", o.flag, got)
		}
		_, envErr := Load(Sources{
			CloudConfig: []byte(`{"apiKey":"k","projectID":"p"}`),
			Environ:     []string{o.env + "=" + value},
		})
		if envErr == nil {
			t.Fatalf("%s=%s was accepted from the environment", o.env, value)
		}
		want := strings.Replace(envErr.Error(), "(env "+o.env+")", "(flag --"+o.flag+")", 1)
		if got.Error() != want {
			t.Errorf("--%s=%s:\n got %s\nwant %s", o.flag, value, got, want)
		}
	}
	if tested == 0 {
		t.Fatal("no typed option was tested")
	}

	fs := newFlags(t)
	err := fs.Parse([]string{"--metal-api-qps=abc"})
	if got, want := FlagError(err).Error(), `invalid configuration: apiQPS (flag --metal-api-qps): "abc" is not a number`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, args := range [][]string{{"--no-such-flag"}, {"--metal-api-qps"}} {
		if err := newFlags(t).Parse(args); err == nil || FlagError(err) != nil {
			t.Errorf("%q: FlagError(%v) must be nil: not a value that does not parse", args, err)
		}
	}
}

// TestFlagsAcceptWhatEnvAccepts: the command line parses values as every
// other layer does (assign), so what METAL_* accepts a flag accepts too.
func TestFlagsAcceptWhatEnvAccepts(t *testing.T) {
	for key, vals := range layerValues {
		o, _ := optionByKey(key)
		if o.flag == "" {
			continue
		}
		for _, v := range vals {
			if err := newFlags(t).Parse([]string{"--" + o.flag + "=" + v}); err != nil {
				t.Errorf("--%s=%s: %v", o.flag, v, err)
			}
		}
	}
	// Spaces around a value are trimmed in every layer.
	fs := newFlags(t)
	if err := fs.Parse([]string{"--metal-api-retries= 3 "}); err != nil {
		t.Fatal(err)
	}
	if n, _ := fs.GetInt("metal-api-retries"); n != 3 {
		t.Errorf("--metal-api-retries=' 3 ' = %d, want 3", n)
	}
}
