package controlplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// The real client is what the provider hands to New.
var _ metalAPI = (*metal.Client)(nil)

const integrationTag = "cluster-api-provider-packet:cluster-id:it"

// cluster is a real kube-apiserver, the Equinix Metal emulator with three
// devices and a tagged EIP assigned to the first, three control-plane Nodes
// for those devices, and for each node a TLS /healthz server on its own
// loopback address at the apiserver's port — the node's kube-apiserver.
type cluster struct {
	tb       testing.TB
	ctx      context.Context
	kube     kubernetes.Interface
	emu      *emulator.Emulator
	metal    *metal.Client
	recorder record.EventRecorder
	port     int
	eipID    string
	eip      string
	devices  map[string]string // node → device ID
	servers  map[string]*fakeAPIServer
	// stopManager stops the last manager started (idempotent).
	stopManager func()
}

func startCluster(tb testing.TB) *cluster {
	tb.Helper()
	return startClusterIn(tb, nil)
}

// startClusterIn is startCluster with the control-plane devices in the
// given metros (node → metro; "da" for a node not named). The EIP is in da.
func startClusterIn(tb testing.TB, metros map[string]string) *cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test against a real kube-apiserver; run without -short")
	}
	env := testenv.New(tb)
	_, ctx := ktesting.NewTestContext(tb)
	ctx, cancel := context.WithCancel(ctx)
	tb.Cleanup(cancel)
	c := &cluster{tb: tb, ctx: ctx, kube: kubernetes.NewForConfigOrDie(env.Config),
		devices: map[string]string{}, servers: map[string]*fakeAPIServer{}}

	// The apiserver creates default/kubernetes shortly after it is ready;
	// its targetPort is the port every node's apiserver listens on.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		svc, err := c.kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c.port = svc.Spec.Ports[0].TargetPort.IntValue()
		return true, nil
	})
	if err != nil {
		tb.Fatalf("default/kubernetes never appeared: %v", err)
	}
	// An unrelated Service's slice in default: upstream mirrored it too.
	_, err = c.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.9.9.9"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}

	c.emu = emulator.StartForTest(tb, nil, emulator.Options{})
	for _, n := range []string{"a", "b", "c"} {
		metro := "da"
		if m := metros[n]; m != "" {
			metro = m
		}
		d, err := c.emu.AddDevice(emulator.DeviceSeed{Hostname: "cp-" + n, Metro: metro})
		if err != nil {
			tb.Fatal(err)
		}
		c.devices[n] = d.ID
	}
	res, err := c.emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: []string{integrationTag}, AssignedTo: []string{c.devices["a"]}})
	if err != nil {
		tb.Fatal(err)
	}
	c.eipID, c.eip = res.ID, res.Prefix.Addr().String()
	c.metal, err = metal.New(metal.Options{
		BaseURL: c.emu.URL(), APIKey: config.Secret(emulator.DefaultToken), ProjectID: emulator.DefaultProjectID,
		Timeout: 5 * time.Second, QPS: 100, Burst: 100,
	})
	if err != nil {
		tb.Fatal(err)
	}

	for _, n := range []string{"a", "b", "c"} {
		c.servers[n] = startFakeAPIServer(tb, nodeIPs[n], c.port)
		node, err := c.kube.CoreV1().Nodes().Create(ctx, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{labelControlPlane: ""}},
			Spec:       v1.NodeSpec{ProviderID: "equinixmetal://" + c.devices[n]},
		}, metav1.CreateOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: n}, {Type: v1.NodeInternalIP, Address: nodeIPs[n]}}
		if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	// A worker with a healthy "apiserver" must never get the EIP.
	c.servers["w"] = startFakeAPIServer(tb, nodeIPs["w"], c.port)
	w, err := c.kube.CoreV1().Nodes().Create(ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w"}, Spec: v1.NodeSpec{ProviderID: "equinixmetal://" + c.devices["a"] + "-worker"},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	w.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIPs["w"]}}
	if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		tb.Fatal(err)
	}

	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	tb.Cleanup(b.Shutdown)
	c.recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: fieldmanager.CCM})
	return c
}

// startManager runs a Manager until the test ends.
func (c *cluster) startManager(opts Options) *Manager {
	opts.EIPTag = integrationTag
	m := New(opts, c.metal, c.kube, nil, c.recorder)
	ctx, cancel := context.WithCancel(c.ctx)
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Run(ctx); err != nil {
			c.tb.Errorf("Run: %v", err)
		}
	}()
	c.stopManager = func() { once.Do(func() { cancel(); <-done }) }
	c.tb.Cleanup(c.stopManager)
	return m
}

// cancelManager stops the manager startManager started last.
func (c *cluster) cancelManager() { c.stopManager() }

// holders are the nodes the EIP is assigned to, as Equinix says.
func (c *cluster) holders() []string {
	r, ok := c.emu.Reservation(c.eipID)
	if !ok {
		c.tb.Fatal("the EIP reservation is gone")
	}
	var out []string
	for _, a := range r.Assignments {
		name := "device " + a.Device
		for n, d := range c.devices {
			if d == a.Device {
				name = n
			}
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// settle waits until the EIP is on want and the manager has kept it there
// for three rounds in a row, then checks that it has exactly one
// assignment.
func (c *cluster) settle(m *Manager, want string) {
	c.tb.Helper()
	var since, streak int
	err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		st := m.snapshot()
		if st.HolderNode != want || st.Last.Kind != keep || !slices.Equal(c.holders(), []string{want}) {
			streak = 0
			return false, nil
		}
		if streak == 0 {
			since, streak = st.Rounds, 1
		}
		return st.Rounds-since >= 3, nil
	})
	if err != nil {
		c.tb.Fatalf("the EIP did not settle on %s: Equinix says %v, manager status %+v", want, c.holders(), m.snapshot())
	}
	if got := c.holders(); !slices.Equal(got, []string{want}) {
		c.tb.Fatalf("after settling: assignments %v, want exactly one, on %s", got, want)
	}
}

// waitRounds waits until the manager has run n more rounds.
func (c *cluster) waitRounds(m *Manager, n int) {
	c.tb.Helper()
	start := m.snapshot().Rounds
	err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return m.snapshot().Rounds-start >= n, nil
	})
	if err != nil {
		c.tb.Fatalf("the manager did not run %d rounds: %+v", n, m.snapshot())
	}
}

func (c *cluster) setUnschedulable(node string, v bool) {
	c.tb.Helper()
	n, err := c.kube.CoreV1().Nodes().Get(c.ctx, node, metav1.GetOptions{})
	if err != nil {
		c.tb.Fatal(err)
	}
	n.Spec.Unschedulable = v
	if _, err := c.kube.CoreV1().Nodes().Update(c.ctx, n, metav1.UpdateOptions{}); err != nil {
		c.tb.Fatal(err)
	}
}

func (c *cluster) events(reason string) []string {
	c.tb.Helper()
	l, err := c.kube.CoreV1().Events(externalServiceNamespace).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.tb.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		if e.Reason == reason && e.InvolvedObject.Name == externalServiceName {
			out = append(out, e.Message)
		}
	}
	return out
}

func TestIntegrationFailover(t *testing.T) {
	c := startCluster(t)
	assigns := func() int64 { return c.emu.Count(emulator.RouteAssignIP) + c.emu.Count(emulator.RouteDeleteIP) }
	m := c.startManager(Options{UseHostIP: true, Interval: 200 * time.Millisecond, Timeout: 500 * time.Millisecond, Failures: 3})

	c.settle(m, "a")
	t.Run("routing objects", func(t *testing.T) {
		svc, err := c.kube.CoreV1().Services(externalServiceNamespace).Get(c.ctx, externalServiceName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerIP != c.eip ||
			svc.Annotations[metalLBAddressPoolAnnotation] != metalLBDisabledPool {
			t.Errorf("external Service: type %s, loadBalancerIP %q, annotations %v", svc.Spec.Type, svc.Spec.LoadBalancerIP, svc.Annotations)
		}
		if p := svc.Spec.Ports; len(p) != 1 || int(p[0].Port) != c.port || p[0].TargetPort.IntValue() != c.port || p[0].Name != "https" {
			t.Errorf("external Service ports = %+v, want https %d → %d", p, c.port, c.port)
		}
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != c.eip {
			t.Errorf("status ingress = %+v, want %s", ing, c.eip)
		}
		l, err := c.kube.DiscoveryV1().EndpointSlices(externalServiceNamespace).List(c.ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + externalServiceName})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				got = append(got, fmt.Sprintf("%s %v :%d", s.Name, e.Addresses, *s.Ports[0].Port))
			}
		}
		want := []string{fmt.Sprintf("%s [192.0.2.1] :%d", externalServiceName, c.port)}
		if !slices.Equal(got, want) {
			t.Errorf("mirrored endpoints = %v, want %v (only default/kubernetes)", got, want)
		}
		for _, mf := range svc.ManagedFields {
			if mf.Manager != fieldmanager.CCM && mf.Manager != classFieldManager {
				t.Errorf("field manager %q on the external Service, want only %q and %q", mf.Manager, fieldmanager.CCM, classFieldManager)
			}
		}
	})

	t.Run("a holder failing one probe in three keeps the EIP", func(t *testing.T) {
		before := assigns()
		c.servers["a"].setFail(func(n int64) bool { return n%3 == 0 })
		c.waitRounds(m, 30)
		c.servers["a"].setFail(nil)
		if got := c.holders(); !slices.Equal(got, []string{"a"}) || assigns() != before {
			t.Fatalf("holders %v, %d assign/unassign calls; want the EIP still on a, no calls", got, assigns()-before)
		}
	})

	t.Run("stopping the holder's apiserver moves the EIP", func(t *testing.T) {
		c.servers["a"].Stop()
		c.settle(m, "b")
		// Events are sent asynchronously by the broadcaster.
		err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return slices.ContainsFunc(c.events(reasonMoved), func(m string) bool {
				return strings.Contains(m, "from a to node b: holder node a failed")
			}), nil
		})
		if err != nil {
			t.Errorf("no %s event for the move from a to b: %v", reasonMoved, c.events(reasonMoved))
		}
	})

	t.Run("cordoning the holder moves the EIP", func(t *testing.T) {
		c.setUnschedulable("b", true)
		c.settle(m, "c") // a is still down
	})

	t.Run("nodes coming back do not move the EIP again", func(t *testing.T) {
		before := assigns()
		c.servers["a"].Start()
		c.setUnschedulable("b", false)
		c.waitRounds(m, 15)
		if got := c.holders(); !slices.Equal(got, []string{"c"}) || assigns() != before {
			t.Fatalf("holders %v after %d calls, want c and no calls", got, assigns()-before)
		}
	})

	t.Run("no healthy node leaves the EIP where it is and reports it", func(t *testing.T) {
		before := assigns()
		for _, n := range []string{"a", "b", "c"} {
			c.servers[n].Stop()
		}
		err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return len(c.events(reasonUnhealthy)) > 0, nil
		})
		if err != nil {
			t.Fatalf("no %s event", reasonUnhealthy)
		}
		c.waitRounds(m, 5)
		if got := c.holders(); !slices.Equal(got, []string{"c"}) || assigns() != before {
			t.Fatalf("holders %v after %d calls, want c untouched", got, assigns()-before)
		}
		c.servers["b"].Start()
		c.settle(m, "b")
	})

	if v, err := testutil.GetCounterMetricValue(metricFailovers.WithLabelValues(causeUnhealthy)); err != nil || v < 2 {
		t.Errorf("failovers_total{cause=unhealthy} = %v, %v; want at least 2", v, err)
	}
	if v, err := testutil.GetCounterMetricValue(metricFailovers.WithLabelValues(causeCordoned)); err != nil || v < 1 {
		t.Errorf("failovers_total{cause=cordoned} = %v, %v; want at least 1", v, err)
	}
}

// TestIntegrationLeaderOnFailedNode is upstream issue #304: the CCM that
// holds the leader lease runs on the node that holds the EIP, and that node
// dies. The replica on a surviving node wins the next election and moves
// the EIP.
// TestIntegrationFailoverStaysInMetro: the EIP is in da; b, first by name,
// is in sv. Equinix (here the emulator) refuses to assign an EIP outside
// its metro, so the failover must go to c, and with no healthy node left
// in da the EIP must stay on its holder — never unassigned for a move
// that cannot be made — with an Event naming the metros.
func TestIntegrationFailoverStaysInMetro(t *testing.T) {
	c := startClusterIn(t, map[string]string{"b": "sv"})
	m := c.startManager(Options{UseHostIP: true, Interval: 200 * time.Millisecond, Timeout: 500 * time.Millisecond, Failures: 3})
	c.settle(m, "a")

	c.servers["a"].Stop()
	c.settle(m, "c")

	// What the decision avoids: Equinix's answer to an assignment across
	// metros.
	_, err := c.metal.AssignIP(c.ctx, c.devices["b"], c.eip)
	if err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "metro") {
		t.Fatalf("assigning the da EIP to b in sv: %v; want a 422 naming the metro, as Equinix answers", err)
	}

	unassigns := c.emu.Count(emulator.RouteDeleteIP)
	c.servers["c"].Stop()
	c.waitRounds(m, 15)
	if got := c.holders(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("holders %v with only b (sv) healthy; want the EIP left on c", got)
	}
	if n := c.emu.Count(emulator.RouteDeleteIP) - unassigns; n != 0 {
		t.Fatalf("%d unassign calls with no healthy node in the EIP's metro; want none", n)
	}
	if st := m.snapshot(); st.Last.Kind != stuck || !strings.Contains(st.Last.Reason, "healthy nodes in other metros (b in sv)") {
		t.Fatalf("last decision %+v; want stuck, naming b in sv", st.Last)
	}
	err = wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return slices.ContainsFunc(c.events(reasonUnhealthy), func(m string) bool {
			return strings.Contains(m, "Equinix assigns an Elastic IP only in its own metro: add a control-plane node in da")
		}), nil
	})
	if err != nil {
		t.Errorf("no %s event naming the metro: %v", reasonUnhealthy, c.events(reasonUnhealthy))
	}

	// a comes back: the EIP moves home.
	c.servers["a"].Start()
	c.settle(m, "a")
}

func TestIntegrationLeaderOnFailedNode(t *testing.T) {
	c := startCluster(t)
	opts := Options{UseHostIP: true} // the defaults: 2s, 1s, 3 failures
	type replica struct {
		leading atomic.Bool
		cancel  context.CancelFunc
		done    chan struct{}
	}
	run := func(identity string) *replica {
		r := &replica{done: make(chan struct{})}
		ctx, cancel := context.WithCancel(c.ctx)
		r.cancel = cancel
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "cloud-controller-manager"},
			Client:     c.kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		}
		go func() {
			defer close(r.done)
			leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
				Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(ctx context.Context) {
						r.leading.Store(true)
						o := opts
						o.EIPTag = integrationTag
						_ = New(o, c.metal, c.kube, nil, c.recorder).Run(ctx)
					},
					OnStoppedLeading: func() { r.leading.Store(false) },
				},
			})
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	onA := run("ccm-on-a")
	if err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return onA.leading.Load(), nil
	}); err != nil {
		t.Fatal("the replica on a never led")
	}
	onB := run("ccm-on-b")
	// Let a's manager come up and confirm the holder before the crash.
	if err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().Services(externalServiceNamespace).Get(ctx, externalServiceName, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal("the leader never created the external Service")
	}

	// Node a dies: its apiserver and the leading CCM go at once, and the
	// lease is not released (a crash, not a shutdown).
	start := time.Now()
	c.servers["a"].Stop()
	onA.cancel()
	if err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		h := c.holders()
		return len(h) == 1 && h[0] != "a", nil
	}); err != nil {
		t.Fatalf("the EIP never left a: %v", c.holders())
	}
	t.Logf("EIP moved to %v %.2fs after node a (holder and leader) died; lease duration 4s, probe interval 2s, 3 failures",
		c.holders(), time.Since(start).Seconds())
	if !onB.leading.Load() {
		t.Fatal("the EIP moved but the replica on b is not the leader")
	}
	if got := c.holders(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("holders = %v, want [b]", got)
	}
}

// BenchmarkFailover measures, with the default settings (probe every 2s,
// 1s timeout, 3 failures, fast re-probe every 0.5s while failing), the time
// from the holder's apiserver dying to the EIP's new assignment existing in
// Equinix. "refused" stops the server (connections refused at once);
// "hung" makes it stop answering (every probe waits for its timeout), the
// worse case. The kill falls at a random moment of the probe cycle.
//
//	go test -run '^$' -bench BenchmarkFailover -benchtime 8x ./host/controlplane/
func BenchmarkFailover(b *testing.B) {
	c := startCluster(b)
	m := c.startManager(Options{UseHostIP: true})
	c.settle(m, "a")
	for _, mode := range []string{"refused", "hung"} {
		b.Run(mode, func(b *testing.B) {
			var samples []float64
			b.StopTimer()
			for range b.N {
				// Everything healthy and past its rise before the kill.
				if err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
					st := m.snapshot()
					return st.HealthyNodes == 3 && st.Last.Kind == keep && len(c.holders()) == 1, nil
				}); err != nil {
					b.Fatalf("never settled: %+v", m.snapshot())
				}
				c.waitRounds(m, 2)
				holder := c.holders()[0]
				time.Sleep(time.Duration(rand.Int64N(int64(2 * time.Second))))
				s := c.servers[holder]
				b.StartTimer()
				start := time.Now()
				if mode == "refused" {
					s.Stop()
				} else {
					s.setDelay(time.Hour)
				}
				for {
					h := c.holders()
					if len(h) == 1 && h[0] != holder {
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
				b.StopTimer()
				samples = append(samples, time.Since(start).Seconds())
				if mode == "refused" {
					s.Start()
				} else {
					s.setDelay(0)
				}
			}
			slices.Sort(samples)
			var sum float64
			for _, x := range samples {
				sum += x
			}
			b.ReportMetric(sum/float64(len(samples)), "s/failover")
			b.ReportMetric(samples[len(samples)-1], "max-s/failover")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d failovers, seconds: %v", mode, len(samples), samples)
		})
	}
}
