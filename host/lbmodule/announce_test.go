package lbmodule_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// endpointsCluster is what the announcement check reads: Services (the lister) and
// the nodes of their ready endpoints (the EndpointSlice index), and the
// BGP nodes the snapshot has.
type endpointsCluster struct {
	mu       sync.Mutex
	services map[string]*corev1.Service
	ready    map[string][]string
	bgp      []string
	// metros: a BGP node's metro label, and the metro each Service
	// address is reserved in (none: not located).
	nodeMetro map[string]string
	ipMetro   map[string]string
}

func (c *endpointsCluster) service(ns, name string) (*corev1.Service, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.services[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
}

func (c *endpointsCluster) readyNodes(ns, name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready[ns+"/"+name]
}

func (c *endpointsCluster) setReady(key string, nodes ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready[key] = nodes
}

// snapshot is the module's input of the endpointsCluster, as the provider's
// snapshotter builds it.
func (c *endpointsCluster) snapshot(context.Context) (sdk.GenerateRequest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := lbsnapshot.Input{Locate: func(ip string) (sdk.AddressLocation, bool) {
		m, ok := c.ipMetro[ip]
		return sdk.AddressLocation{IP: ip, Metro: m}, ok
	}}
	for _, s := range c.services {
		in.Services = append(in.Services, s)
	}
	req := lbsnapshot.Build(in)
	for _, n := range c.bgp {
		node := sdk.Node{Name: n}
		if m := c.nodeMetro[n]; m != "" {
			node.Labels = map[string]string{sdk.MetroLabel: m}
		}
		req.Nodes = append(req.Nodes, node)
	}
	return req, nil
}

func lbService(name, ip string, policy corev1.ServiceExternalTrafficPolicy) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy},
		Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip}}}},
	}
}

// TestNoAnnouncingNodeEvents: through the reconciler. A Local Service whose
// ready endpoints are all on nodes outside the BGP selection gets one
// Warning NoAnnouncingNode (not one per sync), a Normal
// AnnouncingNodeRestored when an endpoint lands on a BGP node (an
// EndpointSlice change alone, no sync), and a Warning again when it leaves.
// A Cluster Service in the same place gets nothing: any node forwards it.
func TestNoAnnouncingNodeEvents(t *testing.T) {
	c := &endpointsCluster{
		services: map[string]*corev1.Service{
			"default/web":   lbService("web", "145.40.1.5", corev1.ServiceExternalTrafficPolicyLocal),
			"default/other": lbService("other", "145.40.1.6", corev1.ServiceExternalTrafficPolicyCluster),
		},
		ready: map[string][]string{"default/web": {"cp-0", "cp-1"}, "default/other": {"cp-0"}},
		bgp:   []string{"worker-0", "worker-1"},
	}
	rec := record.NewFakeRecorder(100)
	ann := lbmodule.NewAnnouncements(lbmodule.AnnouncementsConfig{Service: c.service, ReadyNodes: c.readyNodes, Recorder: rec})
	clock := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	m, err := wasmhost.LoadBytes(context.Background(), "empty", sdktest.Build(t, "../../modules/empty"), sdk.Options{}, opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	r, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{
		Module: m, Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Kube: kubefake.NewClientset(),
		Mapper: meta.NewDefaultRESTMapper(nil), Snapshot: c.snapshot, Announcements: ann, Recorder: rec, Clock: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// expect: one Event containing every want, or none when want is empty.
	expect := func(step string, want ...string) {
		t.Helper()
		got := drain(rec)
		if n := min(len(want), 1); len(got) != n {
			t.Fatalf("%s: events %q, want %d", step, got, n)
		}
		for _, w := range want {
			if !strings.Contains(got[0], w) {
				t.Fatalf("%s: event %q lacks %q", step, got[0], w)
			}
		}
	}

	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	expect("first sync", "Warning NoAnnouncingNode", "145.40.1.5", "cp-0, cp-1", "externalTrafficPolicy: Cluster")
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	expect("unchanged resync")

	// A pod of web becomes ready on a BGP node: the EndpointSlice informer
	// says so, without a sync of the module.
	c.setReady("default/web", "cp-0", "worker-1")
	ann.EndpointsChanged("default", "web")
	expect("endpoint on a BGP node", "Normal AnnouncingNodeRestored", "worker-1")
	ann.EndpointsChanged("default", "web")
	expect("the same again")

	c.setReady("default/web", "cp-1")
	ann.EndpointsChanged("default", "web")
	expect("back off the BGP nodes", "Warning NoAnnouncingNode", "cp-1")

	// The BGP selection changes to take cp-1 in: the next sync sees it.
	c.mu.Lock()
	c.bgp = append(c.bgp, "cp-1")
	c.mu.Unlock()
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	expect("cp-1 selected for BGP", "Normal AnnouncingNodeRestored", "cp-1")
}

// TestNoAnnouncingNodeInAnotherMetro: an Elastic IP is routed only in
// its metro, so a Local Service whose ready endpoints are on BGP nodes of
// another metro has no path either, and the Event says which metro; an
// endpoint on a BGP node of the right metro restores it.
func TestNoAnnouncingNodeInAnotherMetro(t *testing.T) {
	c := &endpointsCluster{
		services:  map[string]*corev1.Service{"default/api": lbService("api", "145.40.64.5", corev1.ServiceExternalTrafficPolicyLocal)},
		ready:     map[string][]string{"default/api": {"da-0"}},
		bgp:       []string{"da-0", "da-1", "sv-0"},
		nodeMetro: map[string]string{"da-0": "da", "da-1": "da", "sv-0": "sv"},
		ipMetro:   map[string]string{"145.40.64.5": "sv"},
	}
	rec := record.NewFakeRecorder(100)
	ann := lbmodule.NewAnnouncements(lbmodule.AnnouncementsConfig{Service: c.service, ReadyNodes: c.readyNodes, Recorder: rec})
	req, _ := c.snapshot(context.Background())
	for _, step := range []struct {
		name  string
		ready []string
		want  []string // one Event with all of these; none when empty
	}{
		{"on a BGP node of another metro", []string{"da-0"}, []string{"Warning NoAnnouncingNode", "145.40.64.5", "metro sv", "da-0", "BGP nodes in sv"}},
		{"still there", []string{"da-0", "da-1"}, nil},
		{"on a BGP node of its metro", []string{"da-0", "sv-0"}, []string{"Normal AnnouncingNodeRestored", "sv-0"}},
	} {
		c.setReady("default/api", step.ready...)
		if step.name == "on a BGP node of another metro" {
			ann.Observe(req)
		} else {
			ann.EndpointsChanged("default", "api")
		}
		got := drain(rec)
		if len(got) != min(len(step.want), 1) {
			t.Fatalf("%s: events %q, want %d", step.name, got, min(len(step.want), 1))
		}
		for _, w := range step.want {
			if !strings.Contains(got[0], w) {
				t.Fatalf("%s: event %q lacks %q", step.name, got[0], w)
			}
		}
		if strings.Contains(strings.Join(got, " "), "AnnouncingNodeRestored") && strings.Contains(strings.Join(got, " "), "da-0") {
			t.Fatalf("%s: %q names a node of another metro as announcing", step.name, got)
		}
	}

	// Without a location (an address the reservation cache does not
	// know), any BGP node counts, as before.
	c2 := &endpointsCluster{
		services: map[string]*corev1.Service{"default/api": lbService("api", "145.40.64.5", corev1.ServiceExternalTrafficPolicyLocal)},
		ready:    map[string][]string{"default/api": {"da-0"}},
		bgp:      []string{"da-0", "sv-0"}, nodeMetro: map[string]string{"da-0": "da", "sv-0": "sv"},
	}
	ann2 := lbmodule.NewAnnouncements(lbmodule.AnnouncementsConfig{Service: c2.service, ReadyNodes: c2.readyNodes, Recorder: rec})
	req2, _ := c2.snapshot(context.Background())
	ann2.Observe(req2)
	if got := drain(rec); len(got) != 0 {
		t.Fatalf("an unlocated address on a BGP node: events %q, want none", got)
	}
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
