package config

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// FuzzLoadLayers drives the whole layered load as the CCM's command does:
// a command line (one argument per line) parsed into the flag set AddFlags
// registers, METAL_* variables (one KEY=VALUE per line) and the bytes of the
// cloud-config Secret. Whatever they hold:
//
//   - nothing panics;
//   - a flag value that does not parse is refused by pflag, and FlagError
//     words it as one problem naming the option and its flag;
//   - Load refuses with a *validationError whose every problem names an
//     option (or the cloud-config file), on one line, and never echoes a
//     secret;
//   - a config Load accepts validates again: written back as a cloud-config
//     file alone it loads to the same Config (when its strings are UTF-8,
//     as JSON needs), so no layer accepts a value another layer (or
//     validation) would refuse;
//   - the annotation templates of an accepted config render names the SDK's
//     matcher recognises as the CCM's own, one per template, index and
//     family, so a peer that goes away has its annotations removed.
func FuzzLoadLayers(f *testing.F) {
	type seed struct{ args, env, file string }
	for _, s := range []seed{
		{"", "", `{"apiKey":"k","projectID":"p"}`},
		{"--metal-project-id=p\n--metal-metro=da", "METAL_API_KEY=k", ""},
		{"--metal-load-balancer=metallb:///metallb-system?bgpType=frr\n--metal-local-asn=65001", "METAL_API_KEY=k\nMETAL_PROJECT_ID=p", `{"bgpPass":"x"}`},
		{"--metal-eip-health-check-use-host-ip\n--metal-api-qps=1.5\n--metal-module-timeout=2s", "METAL_PROJECT_ID=p\nMETAL_API_KEY=k", ""},
		{"--metal-annotation-peer-ip=example.com/peer-{{n}}-ip", "METAL_API_KEY=k\nMETAL_PROJECT_ID=p\nMETAL_ANNOTATION_SRC_IP=example.com/{{n}}-src", ""},
		{"--metal-annotation-local-asn=a/{{n}}-x-{{n}}", "METAL_API_KEY=k\nMETAL_PROJECT_ID=p", ""},
		{"--metal-load-balancer=wasm+oci://registry.example/mod@sha256:" + strings.Repeat("ab", 32), "METAL_API_KEY=k\nMETAL_PROJECT_ID=p", ""},
		{"--metal-bgp-node-selector=a in (b),!c\n--metal-health-check-timeout=1s\n--metal-health-check-interval=2s", "METAL_API_KEY=k\nMETAL_PROJECT_ID=p\nMETAL_LOAD_BALANCER_ID=x", `{"unknown":1}`},
		{"--metal-api-qps=abc", "", ""},
		{"--no-such-flag", "METAL_API_KEY=", "{"},
		{"--metal-local-asn=4294967296\n--metal-api-retries=21", "METAL_LOCAL_ASN=-1", `{"localASN":1e300,"apiServerPort":-0}`},
		{"-h", "", ""},
		{"", "METAL_API_KEY=k\nMETAL_PROJECT_ID=p", `{"bgpNodeSelector":"a\nb in (c","loadbalancer":"metallb://a\nb/"}`},
	} {
		f.Add(s.args, s.env, []byte(s.file))
	}
	const key, pass = "FUZZSECRETKEY", "FuzzPass12345"
	f.Fuzz(func(t *testing.T, args, environ string, file []byte) {
		fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		AddFlags(fs)
		var argv []string
		if args != "" {
			argv = strings.Split(args, "\n")
		}
		if err := fs.Parse(argv); err != nil {
			if fe := FlagError(err); fe != nil {
				var ve *validationError
				if !errors.As(fe, &ve) || len(ve.Problems) != 1 {
					t.Fatalf("FlagError(%v) = %#v, want one problem", err, fe)
				}
				if o, ok := problemOption(ve.Problems[0]); !ok || o.flag == "" || !strings.Contains(ve.Problems[0], "(flag --"+o.flag+")") {
					t.Fatalf("FlagError names no option and its flag: %q", ve.Problems[0])
				}
			}
			return // the command refuses the command line before Load
		}
		var env []string
		if environ != "" {
			env = strings.Split(environ, "\n")
		}
		// The secrets come from the environment, last, so they win over
		// anything the input sets and their values are known here.
		env = append(env, "METAL_API_KEY="+key, "METAL_BGP_PASS="+pass)
		cfg, err := Load(Sources{Flags: fs, Environ: env, CloudConfig: file})
		if err != nil {
			var ve *validationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Load error of type %T: %v", err, err)
			}
			for _, p := range ve.Problems {
				if _, ok := problemOption(p); !ok && !strings.HasPrefix(p, "the cloud-config file") {
					t.Errorf("problem names no option: %q", p)
				}
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error spans lines: %q", err)
			}
			in := args + environ + string(file)
			if msg := err.Error(); !strings.Contains(in, key) && !strings.Contains(in, pass) &&
				(strings.Contains(msg, key) || strings.Contains(msg, pass)) {
				t.Fatalf("secret in error: %v", err)
			}
			return
		}
		checkAccepted(t, cfg)
	})
}

// problemOption is the option a problem of Load names: each starts with the
// option's key ("apiQPS (flag --metal-api-qps): ...", "apiKey is
// required: ...").
func problemOption(p string) (option, bool) {
	key, _, _ := strings.Cut(p, " ")
	return optionByKey(key)
}

// checkAccepted checks a config Load accepted: it loads again, from a
// cloud-config file that holds every option's value, to the same Config,
// and its annotation templates are usable.
func checkAccepted(t *testing.T, cfg *Config) {
	t.Helper()
	if cfg.NodeSelector == nil || cfg.ProjectID == "" || cfg.LocalASN == 0 {
		t.Fatalf("accepted an invalid config: %+v", cfg)
	}
	if lb, err := ParseLoadBalancer(cfg.LoadBalancer); err != nil || !reflect.DeepEqual(lb, cfg.LB) {
		t.Fatalf("loadbalancer %q: LB %#v, parsed again %#v, %v", cfg.LoadBalancer, cfg.LB, lb, err)
	}
	checkTemplates(t, sdk.AnnotationTemplates{LocalASN: cfg.AnnotationLocalASN, PeerASN: cfg.AnnotationPeerASN,
		PeerIP: cfg.AnnotationPeerIP, SrcIP: cfg.AnnotationSrcIP, BGPPass: cfg.AnnotationBGPPass})

	file := map[string]any{}
	rv, rt := reflect.ValueOf(cfg).Elem(), reflect.TypeFor[Config]()
	for i := range rt.NumField() {
		key := rt.Field(i).Tag.Get("key")
		if key == "" {
			continue
		}
		if f := rv.Field(i); f.Kind() == reflect.String && !utf8.ValidString(f.String()) {
			// A flag or variable may hold any bytes; the JSON of the
			// cloud-config cannot (its decoder makes U+FFFD of them).
			return
		}
		switch v := rv.Field(i).Interface().(type) {
		case Secret:
			file[key] = v.Reveal()
		case time.Duration:
			file[key] = v.String()
		default:
			file[key] = v
		}
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(Sources{CloudConfig: b, Environ: []string{}})
	if err != nil {
		t.Fatalf("the accepted config, as a cloud-config file, is refused: %v\n%s", err, b)
	}
	for i := range rt.NumField() {
		if rt.Field(i).Tag.Get("key") == "" {
			continue
		}
		if a, b := rv.Field(i).Interface(), reflect.ValueOf(again).Elem().Field(i).Interface(); a != b {
			t.Fatalf("%s: %#v loads back as %#v", rt.Field(i).Name, a, b)
		}
	}
	if !reflect.DeepEqual(cfg.LB, again.LB) || cfg.NodeSelector.String() != again.NodeSelector.String() {
		t.Fatalf("derived fields differ: %#v %q, loaded back %#v %q", cfg.LB, cfg.NodeSelector, again.LB, again.NodeSelector)
	}

}

// checkTemplates: every peer annotation the SDK renders from accepted
// templates, of either family, is one the SDK's matcher calls the core's,
// and no two (template, index, family) share a name, which would make one
// value overwrite another on the node.
func checkTemplates(t *testing.T, at sdk.AnnotationTemplates) {
	t.Helper()
	node := sdk.Node{LocalASN: 65000, SourceIP: "10.0.0.1", SourceIPv6: "fc00::1"}
	for _, ip := range []string{"169.254.255.1", "169.254.255.2", "fc00::e", "fc00::f"} {
		node.Peers = append(node.Peers, sdk.Peer{ASN: 65530, IP: ip, Password: "pw"})
	}
	v4, v6 := sdk.RenderBGPAnnotations(at, node), sdk.RenderBGPAnnotationsIPv6(at, node)
	want := 10 // five templates, two peers
	if at.MultiHop() != "" {
		want += 2 // and the multihop beside each peer IP
	}
	if len(v4) != want || len(v6) != want {
		t.Fatalf("templates %+v render %d IPv4 and %d IPv6 names for 2 peers each, want %d and %d: %v %v", at, len(v4), len(v6), want, want, v4, v6)
	}
	for name := range v4 {
		if _, both := v6[name]; both {
			t.Fatalf("templates %+v: %q names an IPv4 and an IPv6 annotation", at, name)
		}
	}
	for _, m := range []map[string]string{v4, v6} {
		for name := range m {
			if !at.IsCoreAnnotation(name) {
				t.Fatalf("templates %+v render %q, which IsCoreAnnotation does not match", at, name)
			}
		}
	}
}
