package bgp

import (
	"context"
	"testing"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// A node taken from the queue before the first selection keeps its BGP
// annotations: at start-up the node controller's status update queues
// nodes at once, and an empty selection then read as "not a BGP node"
// stripped what this CCM (or upstream, on a take-over) had written.
func TestNoAnnotationChangeBeforeTheFirstSelection(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{
		tmpl.NetworkIPv4Private: "10.1.0.0/25",
	}}}
	kube := fake.NewSimpleClientset(node)
	inf := informers.NewSharedInformerFactory(kube, 0).Core().V1().Nodes()
	if err := inf.Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	c := NewController(nil, kube, inf, nil, record.NewFakeRecorder(10), Options{Templates: tmpl})
	if !c.annotationsMatch(node) {
		t.Error("before any selection, the node's annotations are reported as needing a change")
	}
	if err := c.syncNode(context.Background(), "node-1"); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "patch" || a.GetVerb() == "update" {
			t.Errorf("before any selection the node was written: %v", a)
		}
	}
}

type countingAPI struct{ neighbours, sessions, sessions6, devices int }

func (a *countingAPI) EnsureDeviceBGPSession(context.Context, string) error { a.sessions++; return nil }
func (a *countingAPI) EnsureDeviceBGPSessionIPv6(context.Context, string) error {
	a.sessions6++
	return nil
}
func (a *countingAPI) DeviceBGPNeighbors(context.Context, string) ([]metalv1.BgpNeighborData, error) {
	a.neighbours++
	out := []metalv1.BgpNeighborData{{AddressFamily: ptr(int32(4)), CustomerAs: ptr(int32(65000)), PeerAs: ptr(int32(65530)),
		PeerIps: []string{"169.254.255.1"}}}
	if a.sessions6 > 0 {
		out = append(out, metalv1.BgpNeighborData{AddressFamily: ptr(int32(6)), CustomerAs: ptr(int32(65000)), PeerAs: ptr(int32(65530)),
			CustomerIp: ptr("2604:1380:4641:c500::1"), PeerIps: []string{"fc00::f", "fc00::e"}})
	}
	return out, nil
}
func (a *countingAPI) Device(context.Context, string) (*metalv1.Device, error) {
	a.devices++
	return &metalv1.Device{}, nil
}

type allNodes struct{}

func (allNodes) SelectNodes(_ context.Context, nodes []*v1.Node) (map[string]bool, error) {
	sel := map[string]bool{}
	for _, n := range nodes {
		sel[n.Name] = true
	}
	return sel, nil
}

// A node's neighbours are read again when its own time comes, not sooner:
// a node joining re-evaluates the selection and syncs every selected node,
// which must not re-read those whose data is past Refresh but not yet due.
func TestNeighboursAreReadAgainWhenDueOnly(t *testing.T) {
	api := &countingAPI{}
	const refresh = 5 * time.Minute
	c := oneNodeController(t, api, Options{Templates: tmpl, Refresh: refresh})
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	c.jitter = func(d time.Duration) time.Duration { return d * 3 / 2 } // due 7m30s after a read
	ctx := context.Background()
	if err := c.syncSelection(ctx); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		advance        time.Duration
		wantNeighbours int
	}{
		{0, 1},                     // the first sync reads
		{refresh + time.Minute, 1}, // past Refresh, not yet due
		{time.Minute, 1},
		{30 * time.Second, 2}, // due
		{time.Second, 2},
	} {
		now = now.Add(step.advance)
		if err := c.syncNode(ctx, "node-1"); err != nil {
			t.Fatal(err)
		}
		if api.neighbours != step.wantNeighbours {
			t.Errorf("at %s: %d neighbour reads, want %d", now.Format(time.TimeOnly), api.neighbours, step.wantNeighbours)
		}
	}
	if api.sessions != 1 {
		t.Errorf("%d session calls, want 1 (the session is known after the first)", api.sessions)
	}
}

// TestIPv6SessionsOnlyOnceNeeded: until a Service has an IPv6 Elastic IP,
// a node costs the calls it cost before IPv6; EnableIPv6 then gives every
// BGP node its IPv6 session once, and its IPv6 peers reach the node.
func TestIPv6SessionsOnlyOnceNeeded(t *testing.T) {
	api := &countingAPI{}
	changes := 0
	c := oneNodeController(t, api, Options{Templates: tmpl, Refresh: time.Hour, OnChange: func() { changes++ }})
	ctx := context.Background()
	if err := c.syncSelection(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.syncNode(ctx, "node-1"); err != nil {
			t.Fatal(err)
		}
	}
	if api.sessions != 1 || api.sessions6 != 0 || api.neighbours != 1 || api.devices != 1 {
		t.Fatalf("IPv4 only: %+v, want one session, neighbour and device call", *api)
	}
	c.EnableIPv6()
	if c.queue.Len() == 0 {
		t.Error("EnableIPv6 queued no node")
	}
	for range 2 {
		if err := c.syncNode(ctx, "node-1"); err != nil {
			t.Fatal(err)
		}
	}
	if api.sessions != 1 || api.sessions6 != 1 || api.neighbours != 2 {
		t.Fatalf("after EnableIPv6: %+v, want one IPv6 session and one more neighbour read", *api)
	}
	nodes := c.Nodes()
	if len(nodes) != 1 || nodes[0].SourceIPv6 != "2604:1380:4641:c500::1" || len(nodes[0].PeersV6) != 2 || nodes[0].PeersV6[0].IP != "fc00::e" {
		t.Fatalf("node %+v, want its IPv6 source and peers (sorted)", nodes)
	}
	if changes < 2 {
		t.Errorf("%d changes reported, want the IPv6 peers to be one", changes)
	}
}

// oneNodeController is a controller over api that selects every node, with
// one Equinix node, node-1, in its informer.
func oneNodeController(t *testing.T, api nodeAPI, opts Options) *Controller {
	t.Helper()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1.NodeSpec{ProviderID: "equinixmetal://7d5f4a40-1b4b-4a7b-9c57-5e0f00000001"}}
	kube := fake.NewSimpleClientset(node)
	inf := informers.NewSharedInformerFactory(kube, 0).Core().V1().Nodes()
	if err := inf.Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	return NewController(api, kube, inf, allNodes{}, record.NewFakeRecorder(10), opts)
}
