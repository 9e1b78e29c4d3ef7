package controlplane

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

func TestIsControlPlaneNode(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{labelControlPlane: ""}, true},
		{map[string]string{labelMaster: "true"}, true},
		{map[string]string{"node-role.kubernetes.io/worker": ""}, false},
		{nil, false},
	}
	for _, tc := range tests {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
		if got := isControlPlaneNode(n); got != tc.want {
			t.Errorf("labels %v: %v, want %v", tc.labels, got, tc.want)
		}
	}
	if isControlPlaneNode(nil) {
		t.Error("nil node is a control-plane node")
	}
}

func TestNodeState(t *testing.T) {
	now := metav1.NewTime(time.Unix(1, 0))
	tests := []struct {
		name string
		node v1.Node
		want nodeState
	}{
		{"current provider ID", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{ProviderID: "equinixmetal://d1"}},
			nodeState{Name: "a", DeviceID: "d1"}},
		{"legacy packet provider ID", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{ProviderID: "packet://d2"}},
			nodeState{Name: "a", DeviceID: "d2"}},
		{"upper-case UUID", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{ProviderID: "equinixmetal://D3"}},
			nodeState{Name: "a", DeviceID: "d3"}},
		{"another cloud's provider ID", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}},
			nodeState{Name: "a"}},
		{"no provider ID yet, cordoned, deleting", v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", DeletionTimestamp: &now}, Spec: v1.NodeSpec{Unschedulable: true}},
			nodeState{Name: "a", Uninitialized: true, Unschedulable: true, Deleting: true}},
	}
	for _, tc := range tests {
		if got := stateOf(&tc.node, health{}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestProbeAddresses(t *testing.T) {
	n := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "cp-1"},
		{Type: v1.NodeExternalIP, Address: "147.75.0.10"}, // the EIP itself
		{Type: v1.NodeExternalIP, Address: "147.75.9.1"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: v1.NodeInternalDNS, Address: "cp-1.internal"},
		{Type: v1.NodeExternalIP, Address: "2604:1380::1"},
		{Type: v1.NodeExternalIP, Address: "not-an-ip"},
	}}}
	got := probeAddresses(n, "147.75.0.10")
	want := []string{"147.75.9.1", "10.0.0.5", "2604:1380::1"}
	if !slices.Equal(got, want) {
		t.Fatalf("probeAddresses = %v, want %v", got, want)
	}
}

func TestRelevantNodeChange(t *testing.T) {
	base := func() *v1.Node {
		return &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{labelControlPlane: ""}},
			Spec:       v1.NodeSpec{ProviderID: "equinixmetal://d1"},
			Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}},
		}
	}
	now := metav1.NewTime(time.Unix(1, 0))
	tests := []struct {
		name   string
		change func(*v1.Node)
		want   bool
	}{
		{"heartbeat only", func(n *v1.Node) { n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady}} }, false},
		{"cordoned", func(n *v1.Node) { n.Spec.Unschedulable = true }, true},
		{"deleting", func(n *v1.Node) { n.DeletionTimestamp = &now }, true},
		{"provider ID set", func(n *v1.Node) { n.Spec.ProviderID = "equinixmetal://d2" }, true},
		{"address changed", func(n *v1.Node) { n.Status.Addresses[0].Address = "10.0.0.2" }, true},
		{"role label removed", func(n *v1.Node) { n.Labels = nil }, true},
	}
	for _, tc := range tests {
		cur := base()
		tc.change(cur)
		if got := relevantNodeChange(base(), cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	worker := func() *v1.Node { n := base(); n.Labels = nil; return n }
	w2 := worker()
	w2.Spec.Unschedulable = true
	if relevantNodeChange(worker(), w2) {
		t.Error("cordoning a worker woke the control-plane loop")
	}
}

func TestDeviceIDFromHref(t *testing.T) {
	for href, want := range map[string]string{
		"/metal/v1/devices/0b2f34b8-54a4":  "0b2f34b8-54a4",
		"/devices/abc":                     "abc",
		"/metal/v1/devices/abc/":           "abc",
		"https://api.equinix.com/x/y/uuid": "uuid",
		"uuid":                             "uuid",
		"/metal/v1/devices/ABC-Def":        "abc-def",
	} {
		if got := deviceIDFromHref(href); got != want {
			t.Errorf("deviceIDFromHref(%q) = %q, want %q", href, got, want)
		}
	}
}

func TestOptions(t *testing.T) {
	cfg := &config.Config{EIPTag: "t", APIServerPort: 443, EIPHealthCheckUseHostIP: true,
		HealthCheckInterval: 4 * time.Second, HealthCheckTimeout: 500 * time.Millisecond, HealthCheckFailures: 5}
	got := OptionsFromConfig(cfg).withDefaults()
	want := Options{EIPTag: "t", APIServerPort: 443, UseHostIP: true, Interval: 4 * time.Second,
		FastInterval: time.Second, Timeout: 500 * time.Millisecond, Failures: 5, Rise: 2, Resync: 30 * time.Second}
	if got.Dial != nil || got.EIPTag != want.EIPTag || got.APIServerPort != want.APIServerPort || got.UseHostIP != want.UseHostIP ||
		got.Interval != want.Interval || got.FastInterval != want.FastInterval || got.Timeout != want.Timeout ||
		got.Failures != want.Failures || got.Rise != want.Rise || got.Grace != 0 || got.Resync != want.Resync {
		t.Fatalf("options = %+v\nwant      %+v", got, want)
	}
	d := Options{}.withDefaults()
	if d.Interval != 2*time.Second || d.FastInterval != 500*time.Millisecond || d.Timeout != time.Second ||
		d.Failures != 3 || d.Rise != 2 || d.Grace != 10*time.Second {
		t.Fatalf("defaults = %+v", d)
	}
}
