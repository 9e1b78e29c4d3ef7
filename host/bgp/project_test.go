package bgp

import (
	"context"
	"strings"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

type fakeProject struct {
	cur     *metalv1.BgpConfig
	enabled int
}

func (f *fakeProject) ProjectBGPConfig(context.Context) (*metalv1.BgpConfig, error) {
	if f.cur == nil {
		return nil, metal.ErrBGPNotEnabled
	}
	return f.cur, nil
}

func (f *fakeProject) EnableProjectBGP(context.Context, int64, config.Secret) error {
	f.enabled++
	return nil
}

// TestEnableProjectPassword: bgpPass is checked only when this CCM would
// set it. A project with BGP enabled is adopted whatever bgpPass says; a
// project without BGP is not enabled with a password the API refuses, and
// the error names the setting without showing the value.
func TestEnableProjectPassword(t *testing.T) {
	enabledCfg := &metalv1.BgpConfig{}
	enabledCfg.SetId("f35a65b2-27fa-4893-b65b-e3118a9cc3e4")
	enabledCfg.SetAsn(65000)
	enabledCfg.SetStatus(metalv1.BGPCONFIGSTATUS_ENABLED)
	const bad = "not-a-valid-pass!"
	cases := []struct {
		name     string
		cur      *metalv1.BgpConfig
		password config.Secret
		err      string
		enables  int
	}{
		{"already enabled, bad password", enabledCfg, bad, "", 0},
		{"not enabled, no password", nil, "", "", 1},
		{"not enabled, good password", nil, "Abcdef123456", "", 1},
		{"not enabled, bad password", nil, bad, "must be 10 to 20 letters and digits", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeProject{cur: tc.cur}
			_, err := EnableProject(context.Background(), api, 65000, tc.password)
			if tc.err == "" && err != nil {
				t.Fatal(err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), bad)) {
				t.Fatalf("err = %v, want %q without the password", err, tc.err)
			}
			if api.enabled != tc.enables {
				t.Fatalf("%d enable requests, want %d", api.enabled, tc.enables)
			}
		})
	}
}
