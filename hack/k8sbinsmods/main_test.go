package main

import (
	"slices"
	"testing"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name       string
		ccm, bins  map[string]string
		up, behind []string
	}{
		{"equal", map[string]string{"a": "v1.0.0"}, map[string]string{"a": "v1.0.0"}, nil, nil},
		{"only one side", map[string]string{"a": "v1.0.0"}, map[string]string{"b": "v2.0.0"}, nil, nil},
		{"k8sbins older", map[string]string{"golang.org/x/net": "v0.60.0"}, map[string]string{"golang.org/x/net": "v0.57.0"},
			[]string{"golang.org/x/net@v0.60.0"}, nil},
		{"staging module at v0.0.0", map[string]string{"k8s.io/kubectl": "v0.37.1"}, map[string]string{"k8s.io/kubectl": "v0.0.0"},
			[]string{"k8s.io/kubectl@v0.37.1"}, nil},
		{"pseudo-versions by date", map[string]string{"k8s.io/utils": "v0.0.0-20260707023825-cf1189d6abe3"},
			map[string]string{"k8s.io/utils": "v0.0.0-20260626114624-be93311217bd"}, []string{"k8s.io/utils@v0.0.0-20260707023825-cf1189d6abe3"}, nil},
		{"release after its pre-release", map[string]string{"google.golang.org/protobuf": "v1.36.12"},
			map[string]string{"google.golang.org/protobuf": "v1.36.12-0.20260120151049-f2248ac996af"}, []string{"google.golang.org/protobuf@v1.36.12"}, nil},
		{"k8sbins newer is left", map[string]string{"github.com/godbus/dbus/v5": "v5.1.0"}, map[string]string{"github.com/godbus/dbus/v5": "v5.2.2"},
			nil, []string{"github.com/godbus/dbus/v5: the CCM has v5.1.0, k8sbins v5.2.2"}},
		{"sorted", map[string]string{"b": "v1.1.0", "a": "v1.1.0"}, map[string]string{"a": "v1.0.0", "b": "v1.0.0"},
			[]string{"a@v1.1.0", "b@v1.1.0"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, behind := plan(tt.ccm, tt.bins)
			if !slices.Equal(up, tt.up) || !slices.Equal(behind, tt.behind) {
				t.Errorf("plan = %q, %q; want %q, %q", up, behind, tt.up, tt.behind)
			}
		})
	}
}
