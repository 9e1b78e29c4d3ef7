package controlplane

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
)

const (
	testTag = "cluster-api-provider-packet:cluster-id:test"
	testEIP = "147.75.0.10"
)

var nodeIPs = map[string]string{"a": "127.0.0.2", "b": "127.0.0.3", "c": "127.0.0.4", "w": "127.0.0.5"}

// harness drives a Manager round by round on a synthetic clock, against a
// fake clientset, a fake Equinix API and real TLS /healthz servers on
// loopback addresses (one per control-plane node, all on the apiserver's
// port, as on a real cluster). Rounds are called directly, so nothing in
// these tests depends on how fast the machine is.
type harness struct {
	t       *testing.T
	ctx     context.Context
	kube    kubernetes.Interface
	metal   *fakeMetal
	m       *Manager
	rec     *record.FakeRecorder
	servers map[string]*fakeAPIServer
	port    int
	now     time.Time
}

func newHarness(t *testing.T, opts Options, metal *fakeMetal) *harness {
	t.Helper()
	_, tctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(tctx)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, metal: metal, servers: map[string]*fakeAPIServer{},
		rec: record.NewFakeRecorder(1000), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	first := startFakeAPIServer(t, nodeIPs["a"], 0)
	h.port = first.port()
	h.servers["a"] = first
	for _, n := range []string{"b", "c", "w"} {
		h.servers[n] = startFakeAPIServer(t, nodeIPs[n], h.port)
	}
	objs := []runtime.Object{
		&v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", UID: "uid-kubernetes"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Ports: []v1.ServicePort{{
				Name: "https", Protocol: v1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(int32(h.port)),
			}}},
		},
		kubernetesSlice("default", "kubernetes", "kubernetes", int32(h.port), "192.0.2.1"),
		kubernetesSlice("default", "web-x1", "web", 8080, "10.9.9.9"),
		testNode("a", true), testNode("b", true), testNode("c", true), testNode("w", false),
	}
	h.kube = fake.NewClientset(objs...)
	opts.EIPTag = testTag
	h.m = New(opts, metal, h.kube, nil, h.rec)
	if err := h.m.start(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

func testNode(name string, controlPlane bool) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec:       v1.NodeSpec{ProviderID: "equinixmetal://dev-" + name},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeHostName, Address: name},
			{Type: v1.NodeInternalIP, Address: nodeIPs[name]},
		}},
	}
	if controlPlane {
		n.Labels[labelControlPlane] = ""
	}
	return n
}

// round runs one round one interval later than the last.
func (h *harness) round() decision {
	h.t.Helper()
	h.now = h.now.Add(h.m.opts.Interval)
	h.m.round(h.ctx, h.now)
	return h.m.snapshot().Last
}

// rounds runs n rounds and returns their decisions' kinds.
func (h *harness) rounds(n int) []actionKind {
	var out []actionKind
	for range n {
		out = append(out, h.round().Kind)
	}
	return out
}

// events drains the recorded Events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// updateNode changes a node and waits until the manager's informer saw it.
func (h *harness) updateNode(name string, f func(*v1.Node)) {
	h.t.Helper()
	n, err := h.kube.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	f(n)
	u, err := h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.waitNode(name, func(c *v1.Node, err error) bool { return err == nil && equality.Semantic.DeepEqual(c.Spec, u.Spec) })
}

func (h *harness) waitNode(name string, ok func(*v1.Node, error) bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(h.ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		n, err := h.m.nodes.Get(name)
		return ok(n, err), nil
	})
	if err != nil {
		h.t.Fatalf("the informer never saw the change of node %s", name)
	}
}

func containsAll(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	joined := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("%s: no entry contains %q in:\n%s", what, w, joined)
		}
	}
}

func TestManagerMovesAwayFromDeadHolder(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	h := newHarness(t, Options{UseHostIP: true}, metal)

	if got := h.rounds(3); !slices.Equal(got, []actionKind{keep, keep, keep}) {
		t.Fatalf("healthy cluster: decisions %v, want keep", got)
	}
	if st := h.m.snapshot(); st.HolderNode != "a" || st.EIP != testEIP || st.HealthyNodes != 3 || st.Err != "" {
		t.Fatalf("status = %+v", st)
	}
	h.servers["a"].Stop()
	// Two failures are not enough; the third moves the EIP to b, the first
	// healthy node by name (the worker w is never a candidate).
	if got := h.rounds(3); !slices.Equal(got, []actionKind{keep, keep, move}) {
		t.Fatalf("after the holder died: decisions %v, want keep, keep, move", got)
	}
	if got := metal.holders(); !slices.Equal(got, []string{"dev-b"}) {
		t.Fatalf("EIP holders = %v, want [dev-b]", got)
	}
	if got := metal.writes(); len(got) != 2 || !strings.HasPrefix(got[0], "DeleteIP as-") || got[1] != "AssignIP dev-b" {
		t.Fatalf("writes = %v, want one unassign then assign to dev-b", got)
	}
	if got := h.rounds(5); slices.ContainsFunc(got, func(k actionKind) bool { return k != keep }) {
		t.Fatalf("after the move: decisions %v, want keep", got)
	}
	if st := h.m.snapshot(); st.HolderNode != "b" || st.Assignments != 1 {
		t.Fatalf("status after the move = %+v", st)
	}
	containsAll(t, "events", h.events(),
		"Normal ControlPlaneEIPMoved Moved the control-plane EIP 147.75.0.10 from a to node b: holder node a failed 3 health checks in a row")
}

func TestManagerFlappingHolderStays(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	h := newHarness(t, Options{UseHostIP: true}, metal)
	// a fails one probe in three: every third request answers 500.
	h.servers["a"].setFail(func(n int64) bool { return n%3 == 0 })
	kinds := h.rounds(30)
	if w := metal.writes(); len(w) != 0 {
		t.Fatalf("a holder failing one probe in three moved the EIP: writes %v, decisions %v", w, kinds)
	}
	if n := h.servers["a"].requests.Load(); n < 30 {
		t.Fatalf("holder probed %d times in 30 rounds", n)
	}
}

func TestManagerCordonedHolderMoves(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	h := newHarness(t, Options{UseHostIP: true}, metal)
	h.rounds(2)
	h.updateNode("a", func(n *v1.Node) { n.Spec.Unschedulable = true })
	// The node event wakes a round 10ms after the last one: it acts on the
	// cordon at once, on the probe results it has, without probing again.
	var before int64
	for _, s := range h.servers {
		before += s.requests.Load()
	}
	h.now = h.now.Add(10 * time.Millisecond)
	h.m.round(h.ctx, h.now)
	if d := h.m.snapshot().Last; d.Kind != move || d.Target.Name != "b" || d.Cause != causeCordoned {
		t.Fatalf("decision = %+v, want move to b because a is cordoned", d)
	}
	var after int64
	for _, s := range h.servers {
		after += s.requests.Load()
	}
	if after != before {
		t.Fatalf("a round 10ms after the last probed again (%d requests)", after-before)
	}
	if got := metal.holders(); !slices.Equal(got, []string{"dev-b"}) {
		t.Fatalf("EIP holders = %v, want [dev-b]", got)
	}
}

func TestManagerDeletedHolderMoves(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	h := newHarness(t, Options{UseHostIP: true}, metal)
	h.rounds(2)
	if err := h.kube.CoreV1().Nodes().Delete(h.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitNode("a", func(_ *v1.Node, err error) bool { return err != nil })
	if d := h.round(); d.Kind != move || d.Target.Name != "b" || d.Cause != causeNotANode {
		t.Fatalf("decision = %+v, want move to b because a is gone", d)
	}
}

func TestManagerRepairsInterruptedMove(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	h := newHarness(t, Options{UseHostIP: true}, metal)
	h.rounds(1)
	h.servers["a"].Stop()
	metal.failNext["AssignIP"] = 2 // the move's assign, then putting it back
	h.rounds(3)                    // the third unassigns, then the assign fails
	if got := metal.holders(); len(got) != 0 {
		t.Fatalf("holders after the failed assign = %v, want none (the test needs the half-done move)", got)
	}
	if st := h.m.snapshot(); !strings.Contains(st.Err, "assigning 147.75.0.10 to node b (device dev-b)") {
		t.Fatalf("status error = %q", st.Err)
	}
	if d := h.round(); d.Kind != assign || d.Target.Name != "b" {
		t.Fatalf("next round decided %+v, want assign to b", d)
	}
	if got := metal.holders(); !slices.Equal(got, []string{"dev-b"}) {
		t.Fatalf("holders after the repair = %v, want [dev-b]", got)
	}
	containsAll(t, "events", h.events(), "Warning ControlPlaneEIPFailoverFailed", "Normal ControlPlaneEIPAssigned Assigned the control-plane EIP 147.75.0.10 to node b")
}

// TestManagerFailedAssignPutsTheEIPBack: when the new assignment fails
// after the holder was unassigned, the EIP goes back on the old holder
// rather than staying on nobody, and the next round moves it.
func TestManagerFailedAssignPutsTheEIPBack(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	h := newHarness(t, Options{UseHostIP: true}, metal)
	h.rounds(1)
	h.servers["a"].Stop()
	metal.failNext["AssignIP"] = 1
	h.rounds(3)
	if got := metal.holders(); !slices.Equal(got, []string{"dev-a"}) {
		t.Fatalf("holders after the failed assign = %v, want [dev-a] (put back)", got)
	}
	if st := h.m.snapshot(); !strings.Contains(st.Err, "AssignIP: 503 Service Unavailable; it is back on device dev-a") {
		t.Fatalf("status error = %q", st.Err)
	}
	if d := h.round(); d.Kind != move || d.Target.Name != "b" {
		t.Fatalf("next round decided %+v, want a move to b", d)
	}
	if got := metal.holders(); !slices.Equal(got, []string{"dev-b"}) {
		t.Fatalf("holders = %v, want [dev-b]", got)
	}
}

// TestManagerStaysInTheEIPMetro: the EIP is in metro da; the first healthy
// node by name is in sv. The EIP moves to the da node, never to sv; with
// only the sv node left healthy it stays put (no unassign at all) and an
// Event names the metros.
func TestManagerStaysInTheEIPMetro(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	metal.res[0].Metro = &metalv1.IPReservationMetro{Code: metalv1.PtrString("da")}
	metal.metros = map[string]string{"dev-a": "da", "dev-b": "sv", "dev-c": "da"}
	h := newHarness(t, Options{UseHostIP: true}, metal)
	h.rounds(1)
	h.servers["a"].Stop()
	h.rounds(3)
	if got := metal.holders(); !slices.Equal(got, []string{"dev-c"}) {
		t.Fatalf("holders = %v, want [dev-c] (b is in another metro)", got)
	}
	h.servers["c"].Stop()
	h.servers["a"].Stop()
	before := len(metal.writes())
	kinds := h.rounds(5)
	if kinds[len(kinds)-1] != stuck {
		t.Fatalf("decisions %v, want stuck", kinds)
	}
	if w := metal.writes(); len(w) != before {
		t.Fatalf("writes %v although no node in da is healthy", w[before:])
	}
	containsAll(t, "events", h.events(), "Warning ControlPlaneUnhealthy", "healthy nodes in other metros (b in sv) cannot take it")
}

func TestManagerNoHealthyNodeLeavesEIP(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	h := newHarness(t, Options{UseHostIP: true}, metal)
	h.rounds(1)
	for _, n := range []string{"a", "b", "c"} {
		h.servers[n].Stop()
	}
	kinds := h.rounds(8)
	if kinds[len(kinds)-1] != stuck {
		t.Fatalf("decisions %v, want stuck at the end", kinds)
	}
	if w := metal.writes(); len(w) != 0 {
		t.Fatalf("writes %v with no healthy node, want none", w)
	}
	var warnings int
	for _, e := range h.events() {
		if strings.HasPrefix(e, "Warning ControlPlaneUnhealthy") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("%d ControlPlaneUnhealthy events over 6 stuck rounds, want 1", warnings)
	}
	// b comes back: after Rise passed probes the EIP moves there.
	h.servers["b"].Start()
	if got := h.rounds(2); !slices.Equal(got, []actionKind{stuck, move}) {
		t.Fatalf("after b came back: %v, want stuck then move", got)
	}
}

func TestManagerTrimsDuplicateAssignments(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-c", "dev-a")
	h := newHarness(t, Options{UseHostIP: true}, metal)
	if d := h.round(); d.Kind != trim {
		t.Fatalf("decision = %+v, want trim", d)
	}
	if got := metal.holders(); !slices.Equal(got, []string{"dev-a"}) {
		t.Fatalf("holders = %v, want [dev-a] (first healthy node by name)", got)
	}
	if d := h.round(); d.Kind != keep {
		t.Fatalf("after trim: %+v, want keep", d)
	}
	containsAll(t, "events", h.events(), "Normal ControlPlaneEIPDuplicateRemoved Control-plane EIP 147.75.0.10: the EIP has 2 assignments; keeping the one on device dev-a")
}

func TestManagerTagErrors(t *testing.T) {
	tests := []struct {
		name    string
		metal   func() *fakeMetal
		wantErr string
	}{
		{"no reservation carries the tag", func() *fakeMetal { return newFakeMetal("other-tag", testEIP, "dev-a") },
			`no Elastic IP reservation in the project carries the tag "` + testTag + `" (eipTag); tag the control-plane EIP with it, or unset eipTag to turn control-plane EIP management off`},
		{"two reservations carry the tag", func() *fakeMetal {
			f := newFakeMetal(testTag, testEIP, "dev-a")
			f.addReservation("147.75.0.11", testTag, "other")
			return f
		}, `2 Elastic IP reservations carry the tag "` + testTag + `" (eipTag): 147.75.0.10 (res-1), 147.75.0.11 (res-3); remove the tag from all but the control-plane EIP`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			metal := tc.metal()
			h := newHarness(t, Options{UseHostIP: true}, metal)
			h.rounds(3)
			if st := h.m.snapshot(); st.Err != tc.wantErr {
				t.Fatalf("error = %q\nwant    %q", st.Err, tc.wantErr)
			}
			if strings.Contains(h.m.snapshot().Err, "\n") {
				t.Error("the error is more than one line")
			}
			if w := metal.writes(); len(w) != 0 {
				t.Fatalf("writes %v, want none", w)
			}
			var n int
			for _, e := range h.events() {
				if strings.Contains(e, reasonEIPNotFound) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d %s events over 3 rounds, want 1", n, reasonEIPNotFound)
			}
		})
	}
}

// TestManagerProbesTheEIP runs without UseHostIP: the holder is judged by
// probes of the EIP itself. The test's dialer plays the network: a
// connection to the EIP reaches the node that Equinix says holds it.
func TestManagerProbesTheEIP(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	route := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, _ := net.SplitHostPort(addr)
		if host == testEIP {
			holders := metal.holders()
			if len(holders) != 1 {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errNoRoute}
			}
			host = nodeIPs[strings.TrimPrefix(holders[0], "dev-")]
		}
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(host, port))
	}
	h := newHarness(t, Options{Dial: route}, metal) // Interval 2s, Grace 10s
	h.rounds(2)
	a := h.servers["a"]
	before := a.requests.Load()
	h.rounds(3)
	if got := a.requests.Load() - before; got != 3 {
		t.Fatalf("holder's server got %d requests in 3 rounds, want 3 (the EIP only, not its host address too)", got)
	}
	a.Stop()
	// The holder has been there for 10s of synthetic time: past the grace,
	// so the third failure moves it.
	if got := h.rounds(3); !slices.Equal(got, []actionKind{keep, keep, move}) {
		t.Fatalf("decisions %v, want keep, keep, move", got)
	}
	// Now b dies as well, just after receiving the EIP: failures of the
	// EIP during the grace do not move it again.
	b := h.servers["b"]
	b.Stop()
	// Rounds 2s apart: the third failure comes 6s after the move, inside
	// the grace; the fifth, 10s after, moves it.
	got := h.rounds(5)
	if !slices.Equal(got, []actionKind{keep, keep, keep, keep, move}) {
		t.Fatalf("after moving to b and b dying: %v, want keep until the 10s grace passed, then move", got)
	}
	if got := metal.holders(); !slices.Equal(got, []string{"dev-c"}) {
		t.Fatalf("holders = %v, want [dev-c]", got)
	}
}

type routeError string

func (e routeError) Error() string { return string(e) }

const errNoRoute = routeError("no route to host")

func TestManagerExternalService(t *testing.T) {
	metal := newFakeMetal(testTag, testEIP, "dev-a")
	h := newHarness(t, Options{UseHostIP: true, APIServerPort: 443}, metal)
	h.round()
	// The fake clientset's tracker does not keep the status subresource
	// apart (its apply of the status drops the spec), so the spec is read
	// from what was sent; the real apiserver is checked by the integration
	// test.
	svc := appliedService(t, h.kube.(*fake.Clientset), "")
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerIP != testEIP ||
		svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass != loadBalancerClass ||
		svc.Annotations[metalLBAddressPoolAnnotation] != metalLBDisabledPool {
		t.Fatalf("external Service spec = %+v, annotations %v", svc.Spec, svc.Annotations)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.IntValue() != h.port {
		t.Fatalf("ports = %+v, want 443 → %d", svc.Spec.Ports, h.port)
	}
	status := appliedService(t, h.kube.(*fake.Clientset), "status")
	if ing := status.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != testEIP {
		t.Fatalf("status ingress = %+v", ing)
	}
	mirrored := func() []string {
		l, err := h.kube.DiscoveryV1().EndpointSlices(externalServiceNamespace).List(h.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				out = append(out, s.Name+"="+strings.Join(e.Addresses, ",")+":"+strconv.Itoa(int(*s.Ports[0].Port)))
			}
		}
		slices.Sort(out)
		return out
	}
	want := externalServiceName + "=192.0.2.1:" + strconv.Itoa(h.port)
	if got := mirrored(); !slices.Equal(got, []string{want}) {
		t.Fatalf("mirrored endpoints = %v, want [%s] (and nothing of default/web)", got, want)
	}

	// A second apiserver registers: the mirror follows.
	src, err := h.kube.DiscoveryV1().EndpointSlices("default").Get(h.ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src.Endpoints = append(src.Endpoints, discoveryv1.Endpoint{Addresses: []string{"192.0.2.2"}})
	if _, err := h.kube.DiscoveryV1().EndpointSlices("default").Update(h.ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(h.ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		s, err := h.m.slices.EndpointSlices("default").Get("kubernetes")
		return err == nil && len(s.Endpoints) == 2, nil
	})
	if err != nil {
		t.Fatal("the informer never saw the new endpoint")
	}
	h.round()
	want2 := externalServiceName + "=192.0.2.2:" + strconv.Itoa(h.port)
	if got := mirrored(); !slices.Equal(got, []string{want, want2}) {
		t.Fatalf("mirrored endpoints = %v, want [%s %s]", got, want, want2)
	}
}

// appliedService decodes the last server-side apply of the external
// Service (subresource "" or "status") that the fake clientset received.
func appliedService(t *testing.T, cs *fake.Clientset, subresource string) *v1.Service {
	t.Helper()
	var last *v1.Service
	for _, a := range cs.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || p.GetPatchType() != types.ApplyPatchType || p.GetResource().Resource != "services" ||
			p.GetSubresource() != subresource || p.GetName() != externalServiceName {
			continue
		}
		if o, ok := a.(interface{ GetPatchOptions() metav1.PatchOptions }); ok && o.GetPatchOptions().FieldManager == classFieldManager {
			continue // the class alone, co-owned (see classFieldManager)
		}
		last = &v1.Service{}
		if err := json.Unmarshal(p.GetPatch(), last); err != nil {
			t.Fatalf("decoding the applied Service: %v", err)
		}
	}
	if last == nil {
		t.Fatalf("no apply of Service %s (subresource %q)", externalServiceName, subresource)
	}
	return last
}
