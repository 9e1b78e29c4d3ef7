package config

import (
	"maps"
	"strings"
	"testing"
)

// TestBGPTimers: bgpHoldTime and bgpKeepaliveTime reach the module as its
// holdTime and keepaliveTime options, as the loadbalancer URL's would; a
// bad value or a URL that says otherwise is an error naming the option.
func TestBGPTimers(t *testing.T) {
	base := []string{"METAL_API_KEY=k", "METAL_PROJECT_ID=p"}
	for _, tc := range []struct {
		name    string
		env     []string
		want    map[string]string // the module's options
		wantErr string
	}{
		{name: "unset", env: []string{"METAL_LOAD_BALANCER=metallb:///"}, want: nil},
		{name: "both", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_HOLD_TIME=9s", "METAL_BGP_KEEPALIVE_TIME=3s"},
			want: map[string]string{"holdTime": "9s", "keepaliveTime": "3s"}},
		{name: "minutes", env: []string{"METAL_LOAD_BALANCER=metallb:///metallb-system/config", "METAL_BGP_HOLD_TIME=3m"}, want: map[string]string{"holdTime": "180s"}},
		{name: "beside the URL's own options", env: []string{"METAL_LOAD_BALANCER=metallb:///?bgpType=frr&holdTime=9s", "METAL_BGP_HOLD_TIME=9s"},
			want: map[string]string{"bgpType": "frr", "holdTime": "9s"}},
		{name: "a module of one's own gets them too", env: []string{"METAL_LOAD_BALANCER=wasm:///m.wasm?namespace=lb", "METAL_BGP_KEEPALIVE_TIME=20s"},
			want: map[string]string{"namespace": "lb", "keepaliveTime": "20s"}},
		{name: "no load balancer", env: []string{"METAL_BGP_HOLD_TIME=9s"}, want: nil},
		{name: "the URL disagrees", env: []string{"METAL_LOAD_BALANCER=metallb:///?holdTime=5s", "METAL_BGP_HOLD_TIME=9s"},
			wantErr: "bgpHoldTime (env METAL_BGP_HOLD_TIME): 9s disagrees with the loadbalancer URL's holdTime=5s; set one of the two"},
		{name: "not whole seconds", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_HOLD_TIME=1500ms"},
			wantErr: "bgpHoldTime (env METAL_BGP_HOLD_TIME): 1.5s is not a whole number of seconds"},
		{name: "too short", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_HOLD_TIME=2s"},
			wantErr: "bgpHoldTime (env METAL_BGP_HOLD_TIME): 2s is out of range; use 3s to 65535s"},
		{name: "keepalive not below hold", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_HOLD_TIME=9s", "METAL_BGP_KEEPALIVE_TIME=9s"},
			wantErr: "bgpKeepaliveTime (env METAL_BGP_KEEPALIVE_TIME): 9s must be shorter than the hold time (9s)"},
		{name: "keepalive not below the default hold", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_KEEPALIVE_TIME=2m"},
			wantErr: "must be shorter than the hold time (90s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(Sources{Environ: append(append([]string{}, base...), tc.env...)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.LB.Options; !maps.Equal(got, tc.want) {
				t.Errorf("module options %v, want %v", got, tc.want)
			}
		})
	}
}
