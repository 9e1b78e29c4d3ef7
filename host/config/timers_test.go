package config

import (
	"maps"
	"strings"
	"testing"
)

// TestBGPTimers: bgpHoldTime, bgpKeepaliveTime, bgpBFDInterval and
// bgpBFDMultiplier reach the module as its holdTime, keepaliveTime,
// bfdInterval and bfdMultiplier options, as the loadbalancer URL's would; a
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
		{name: "bfd", env: []string{"METAL_LOAD_BALANCER=metallb:///?bgpType=frr-k8s", "METAL_BGP_BFD_INTERVAL=300ms", "METAL_BGP_BFD_MULTIPLIER=3"},
			want: map[string]string{"bgpType": "frr-k8s", "bfdInterval": "300ms", "bfdMultiplier": "3"}},
		{name: "bfd in seconds", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_BFD_INTERVAL=1s"}, want: map[string]string{"bfdInterval": "1000ms"}},
		{name: "bfd beside the URL's own", env: []string{"METAL_LOAD_BALANCER=metallb:///?bfdInterval=300ms", "METAL_BGP_BFD_INTERVAL=300ms"}, want: map[string]string{"bfdInterval": "300ms"}},
		{name: "bfd the URL disagrees", env: []string{"METAL_LOAD_BALANCER=metallb:///?bfdInterval=1000ms", "METAL_BGP_BFD_INTERVAL=300ms"},
			wantErr: "bgpBFDInterval (env METAL_BGP_BFD_INTERVAL): 300ms disagrees with the loadbalancer URL's bfdInterval=1000ms; set one of the two"},
		{name: "bfd too fast", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_BFD_INTERVAL=5ms"},
			wantErr: "bgpBFDInterval (env METAL_BGP_BFD_INTERVAL): 5ms is out of range; use 10ms to 60s, or 0s for no BFD"},
		{name: "bfd not whole milliseconds", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_BFD_INTERVAL=300500us"},
			wantErr: "bgpBFDInterval (env METAL_BGP_BFD_INTERVAL): 300.5ms is not a whole number of milliseconds"},
		{name: "bfd multiplier out of range", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_BFD_INTERVAL=300ms", "METAL_BGP_BFD_MULTIPLIER=1"},
			wantErr: "bgpBFDMultiplier (env METAL_BGP_BFD_MULTIPLIER): 1 is out of range; use 2 to 255"},
		{name: "bfd multiplier without interval", env: []string{"METAL_LOAD_BALANCER=metallb:///", "METAL_BGP_BFD_MULTIPLIER=3"},
			wantErr: "bgpBFDMultiplier (env METAL_BGP_BFD_MULTIPLIER): 3 is set but BFD is off; set bgpBFDInterval"},
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
