package config

import (
	"strings"
	"testing"
)

// FuzzCloudConfig feeds arbitrary bytes as cloud-sa.json. Load must never
// panic, must fail with a *ValidationError or succeed, and must never echo
// the API key or the BGP password, whatever else is wrong.
func FuzzCloudConfig(f *testing.F) {
	seeds := []string{
		`{"apiKey":"k","projectID":"p"}`,
		`{"apikey":"k","PROJECTID":"p","localASN":65000.5}`,
		`{"apiKey":"k","projectID":"p","loadbalancer":"metallb:///ns/cm","bgpNodeSelector":"a in (b)"}`,
		`{"apiKey":1,"projectID":true,"metro":null}`,
		`[1,2,3]`, `"str"`, `{`, ``, `{"localASN":1e300}`, `{"apiServerPort":-0}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	const key, pass = "FUZZSECRETKEY", "FuzzPass12345"
	f.Fuzz(func(t *testing.T, b []byte) {
		env := []string{"METAL_API_KEY=" + key, "METAL_BGP_PASS=" + pass}
		cfg, err := Load(Sources{CloudConfig: b, Environ: env})
		if err != nil {
			if _, ok := err.(*validationError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), pass) {
				t.Fatalf("secret in error: %v", err)
			}
			return
		}
		if cfg.NodeSelector == nil {
			t.Fatal("accepted config without a parsed node selector")
		}
		if cfg.ProjectID == "" || cfg.LocalASN == 0 {
			t.Fatalf("accepted an invalid config: %+v", cfg)
		}
	})
}
