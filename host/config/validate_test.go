package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestValidationProblems(t *testing.T) {
	base := []string{"METAL_API_KEY=k", "METAL_PROJECT_ID=p"}
	cases := []struct {
		name string
		env  []string
		file string
		want []string // substrings of the error
	}{
		{name: "missing key and project", env: []string{}, want: []string{"apiKey is required", "projectID is required", "METAL_API_KEY", "METAL_PROJECT_ID"}},
		{name: "unknown lb scheme", env: append(base, "METAL_LOAD_BALANCER=haproxy://x"), want: []string{"loadbalancer", `unknown type "haproxy"`}},
		{name: "malformed lb url", env: append(base, "METAL_LOAD_BALANCER=metallb:///%zz"), want: []string{"loadbalancer", "not a URL"}},
		{name: "lb two slashes", env: append(base, "METAL_LOAD_BALANCER=metallb://metallb-system"), want: []string{"three slashes: metallb:///metallb-system"}},
		{name: "asn not a number", env: append(base, "METAL_LOCAL_ASN=abc"), want: []string{"localASN", "env METAL_LOCAL_ASN", "not a whole number"}},
		{name: "asn too large", env: append(base, "METAL_LOCAL_ASN=4294967296"), want: []string{"localASN", "not a whole number between 0 and 4294967295"}},
		{name: "asn zero", env: append(base, "METAL_LOCAL_ASN=0"), want: []string{"localASN", "0 is not an ASN"}},
		{name: "selector", env: append(base, "METAL_BGP_NODE_SELECTOR=a in b"), want: []string{"bgpNodeSelector", "not a label selector"}},
		{name: "template without n", env: append(base, "METAL_ANNOTATION_PEER_IP=metal.equinix.com/peer-ip"), want: []string{"annotationPeerIP", "lacks {{n}}"}},
		{name: "template with n twice", env: append(base, "METAL_ANNOTATION_LOCAL_ASN=a/{{n}}-x-{{n}}"), want: []string{"annotationLocalASN", "more than once"}},
		{name: "template invalid name", env: append(base, "METAL_ANNOTATION_SRC_IP=bad key {{n}}"), want: []string{"annotationSrcIP", "not a valid annotation name"}},
		{name: "templates collide", env: append(base, "METAL_ANNOTATION_SRC_IP="+DefaultAnnotationPeerIP), want: []string{"annotationSrcIP", "the same as annotationPeerIP"}},
		{name: "a template is the multihop annotation's name", env: append(base, "METAL_ANNOTATION_SRC_IP=metal.equinix.com/bgp-peers-{{n}}-peer-multi-hop"), want: []string{"annotationSrcIP", "multihop annotation (from annotationPeerIP)"}},
		{name: "the multihop annotation's name too long", env: append(base, "METAL_ANNOTATION_PEER_IP=metal.equinix.com/"+strings.Repeat("p", 50)+"-{{n}}-peer-ip"), want: []string{"annotationPeerIP", "multihop annotation the name", "use a shorter name"}},
		{name: "port out of range", env: append(base, "METAL_API_SERVER_PORT=70000"), want: []string{"apiServerPort (env METAL_API_SERVER_PORT): 70000 is not a port"}},
		{name: "negative port", file: `{"apiServerPort": -1}`, env: base, want: []string{"apiServerPort", `cloud-config field "apiServerPort"`}},
		{name: "bad bool", env: append(base, "METAL_EIP_HEALTH_CHECK_USE_HOST_IP=yes please"), want: []string{"eipHealthCheckUseHostIP", "not a boolean"}},
		{name: "bad duration", env: append(base, "METAL_API_TIMEOUT=30"), want: []string{"apiTimeout", "not a duration"}},
		{name: "zero duration", env: append(base, "METAL_HEALTH_CHECK_INTERVAL=0s"), want: []string{"healthCheckInterval", "not a positive duration"}},
		{name: "timeout over interval", env: append(base, "METAL_HEALTH_CHECK_TIMEOUT=5s"), want: []string{"healthCheckTimeout", "longer than healthCheckInterval"}},
		{name: "base url", env: append(base, "METAL_BASE_URL=api.equinix.com"), want: []string{"base-url", "not an http(s) URL"}},
		{name: "not json", file: `{"apiKey": `, env: []string{}, want: []string{"not a JSON object"}},
		{name: "json array value", file: `{"metro": ["da"]}`, env: base, want: []string{"metro", "must be a string, number or boolean"}},
		{name: "emlb", env: append(base, "METAL_LOAD_BALANCER=emlb:///da"), want: []string{"does not support"}},
		{name: "orphan mode", env: append(base, "METAL_ORPHAN_EIPS=delete"), want: []string{"orphanEIPs (env METAL_ORPHAN_EIPS)", `"delete" is not an option; use report or release`}},
		{name: "prefix limit action", env: append(base, "METAL_BGP_MAX_PREFIXES_ACTION=drop"), want: []string{"bgpMaxPrefixesAction (env METAL_BGP_MAX_PREFIXES_ACTION)", `"drop" is not an option; use warn or refuse`}},
		{name: "orphan grace", file: `{"orphanEIPGrace": "-5m"}`, env: base, want: []string{"orphanEIPGrace", "negative"}},
		{name: "memory", env: append(base, "METAL_MODULE_MEMORY_LIMIT_MIB=1"), want: []string{"moduleMemoryLimitMiB", "between 4 and 4096"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{Environ: tc.env}
			if tc.file != "" {
				src.CloudConfig = []byte(tc.file)
			}
			_, err := Load(src)
			if err == nil {
				t.Fatal("want an error")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	_, err := Load(Sources{Environ: []string{
		"METAL_LOCAL_ASN=x", "METAL_LOAD_BALANCER=nope://", "METAL_API_SERVER_PORT=99999", "METAL_BGP_NODE_SELECTOR=(",
	}})
	ve, ok := err.(*validationError)
	if !ok {
		t.Fatalf("want *ValidationError, got %T %v", err, err)
	}
	// apiKey, projectID, localASN, loadbalancer, apiServerPort, bgpNodeSelector
	if len(ve.Problems) != 6 {
		t.Fatalf("want 6 problems, got %d: %q", len(ve.Problems), ve.Problems)
	}
}

const (
	testKey  = "sekr1t-api-key-value"
	testPass = "Hunter2Hunter2"
)

func TestSecretsNeverPrinted(t *testing.T) {
	cfg, err := Load(Sources{Environ: []string{"METAL_API_KEY=" + testKey, "METAL_PROJECT_ID=p", "METAL_BGP_PASS=" + testPass}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.APIKey.Reveal() != testKey || cfg.BGPPass.Reveal() != testPass {
		t.Fatal("secrets not loaded")
	}
	js, _ := json.Marshal(cfg)
	var sb strings.Builder
	slog.New(slog.NewTextHandler(&sb, nil)).Info("config", "cfg", cfg, "key", cfg.APIKey)
	slog.New(slog.NewJSONHandler(&sb, nil)).Info("config", "key", cfg.APIKey)
	for _, out := range []string{
		fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%s", cfg.APIKey),
		fmt.Sprintf("%q", cfg.BGPPass), fmt.Sprintf("%x", cfg.BGPPass), fmt.Sprint(*cfg), string(js), sb.String(),
	} {
		if strings.Contains(out, testKey) || strings.Contains(out, testPass) || strings.Contains(out, fmt.Sprintf("%x", testPass)) {
			t.Errorf("secret leaked: %s", out)
		}
		if !strings.Contains(out, redacted) {
			t.Errorf("no redaction marker in %s", out)
		}
	}
}

func TestSecretsNeverInErrors(t *testing.T) {
	_, err := Load(Sources{Environ: []string{
		"METAL_API_KEY=" + testKey, "METAL_BGP_PASS=bad!" + testPass, "METAL_LOCAL_ASN=zz",
	}})
	if err == nil {
		t.Fatal("want an error")
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testPass) {
		t.Fatalf("secret in error: %v", err)
	}
	if !strings.Contains(err.Error(), "localASN") {
		t.Fatalf("localASN problem not reported: %v", err)
	}
}

// TestBGPPassNotCheckedAtLoad: a password the Equinix API would refuse does
// not stop the CCM at start; it matters only if this CCM enables the
// project's BGP (bgp.EnableProject checks it then).
func TestBGPPassNotCheckedAtLoad(t *testing.T) {
	cfg, err := Load(Sources{Environ: []string{"METAL_API_KEY=" + testKey, "METAL_PROJECT_ID=p", "METAL_BGP_PASS=short!"}})
	if err != nil {
		t.Fatalf("a bgpPass the API would refuse stopped the load: %v", err)
	}
	if cfg.BGPPass.Reveal() != "short!" {
		t.Fatal("bgpPass not loaded")
	}
}
