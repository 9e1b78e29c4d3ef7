package lbmodule_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	testclock "k8s.io/utils/clock/testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// counter reads a counter of the legacy registry, where the reconciler
// registers its metrics.
func counter(t *testing.T, name, result string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// waitFor polls cond; it bounds a wait for work that will happen, it does
// not measure how fast.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type fixture struct {
	r     *lbmodule.Reconciler
	clock *testclock.FakeClock
	calls atomic.Int32
	fail  atomic.Bool
	// slow is how far a snapshot moves the clock: a sync that long.
	slow atomic.Int64
	// during, if set, runs once in a snapshot: an event while a sync runs.
	during atomic.Pointer[func()]
}

func newFixture(t *testing.T, failing bool) *fixture {
	t.Helper()
	return newFixtureWith(t, failing, kubefake.NewClientset())
}

// newFixtureWith is newFixture with the Kubernetes clientset given, for a
// test that sets its reactors before the first sync.
func newFixtureWith(t *testing.T, failing bool, kube *kubefake.Clientset) *fixture {
	t.Helper()
	f := &fixture{clock: testclock.NewFakeClock(time.Unix(1_700_000_000, 0))}
	f.fail.Store(failing)
	m, err := wasmhost.LoadBytes(context.Background(), "empty", sdktest.Build(t, "../../modules/empty"), sdk.Options{}, opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	f.r, err = lbmodule.NewReconciler(lbmodule.ReconcilerConfig{
		Module:  m,
		Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		Kube:    kube,
		Mapper:  meta.NewDefaultRESTMapper(nil),
		Snapshot: func(context.Context) (sdk.GenerateRequest, error) {
			f.calls.Add(1)
			if during := f.during.Swap(nil); during != nil {
				(*during)()
			}
			if d := time.Duration(f.slow.Load()); d > 0 {
				f.clock.Step(d)
			}
			if f.fail.Load() {
				return sdk.GenerateRequest{}, errors.New("informers not synced")
			}
			return sdk.GenerateRequest{}, nil
		},
		Debounce:  time.Second,
		RetryBase: 10 * time.Second,
		Clock:     f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go f.r.Run(ctx)
	return f
}

// waitEnded waits until the fixture's n-th sync has ended (not only taken
// its snapshot): a test that moves the clock "after a sync" moved it
// during the sync otherwise, on a loaded machine.
func (f *fixture) waitEnded(t *testing.T, n int32) {
	t.Helper()
	waitFor(t, "the sync to end", func() bool { return f.calls.Load() == n && !f.r.Running() })
}

// step advances the fake clock once the delaying queue has a timer for the
// sync asked for. The queue always waits on the clock (its heartbeat
// ticker), so a second waiter is that timer. A request made while a sync
// runs is only queued when that sync ends: stepped before, the clock had
// moved past the timer's start and the timer never fired (the test hung
// on a loaded machine).
func (f *fixture) step(t *testing.T, d time.Duration) {
	t.Helper()
	waitFor(t, "the queue's timer for the sync asked for", func() bool { return f.clock.Waiters() >= 2 })
	// Requests still on their way re-arm that timer (stop, then a new one
	// from the time read before): let the queue settle.
	time.Sleep(20 * time.Millisecond)
	f.clock.Step(d)
}

func TestBurstOfEventsIsOneGenerate(t *testing.T) {
	f := newFixture(t, false)
	f.waitEnded(t, 1)
	for range 1000 {
		f.r.MarkDirty()
	}
	// The queue re-arms its timer as the burst's requests arrive; one of
	// them may still be on its way when the clock moves (under the race
	// detector, often). Moving it again until the sync comes asserts the
	// same: one sync, and no more a few minutes later.
	f.step(t, time.Second)
	for i := 0; f.calls.Load() < 2; i++ {
		if i == 600 {
			t.Fatal("no sync after the burst, the clock moved by a second 600 times")
		}
		time.Sleep(50 * time.Millisecond)
		f.clock.Step(time.Second)
	}
	// Nothing else is pending: more time passes without another sync.
	for range 3 {
		f.clock.Step(time.Minute)
		time.Sleep(20 * time.Millisecond)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d generate calls for 1 start + a burst of 1000 events, want 2", n)
	}
}

// A change after a quiet spell is synced at once (after lbmodule.GatherDelay), not
// a debounce later: a new Service's pool comes before MetalLB can give
// its address to a speaker.
func TestChangeAfterQuietSpellIsNotDelayed(t *testing.T) {
	f := newFixture(t, false)
	f.waitEnded(t, 1)
	f.clock.Step(time.Minute)
	f.r.MarkDirty()
	f.r.MarkDirty()
	f.step(t, lbmodule.GatherDelay)
	waitFor(t, "the sync of the change", func() bool { return f.calls.Load() == 2 })
	// Within a debounce of that sync, the next change waits for the rest of it.
	f.r.MarkDirty()
	f.step(t, lbmodule.GatherDelay)
	time.Sleep(50 * time.Millisecond)
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("a change %v after a sync: %d calls, want 2 until a debounce has passed", lbmodule.GatherDelay, n)
	}
	f.clock.Step(time.Second)
	waitFor(t, "the spaced sync", func() bool { return f.calls.Load() == 3 })
}

// A sync that took longer than the debounce spaces the next one by its
// duration: back-to-back multi-second syncs would hold a core.
func TestSlowSyncSpacesTheNext(t *testing.T) {
	before := counter(t, "equinix_metal_lbmodule_syncs_total", "success")
	f := newFixture(t, false)
	f.waitEnded(t, 1)
	f.slow.Store(int64(5 * time.Second))
	f.r.MarkDirty()
	f.step(t, time.Second)
	waitFor(t, "the debounced sync", func() bool { return f.calls.Load() == 2 })
	// That sync took 5s: the next change waits 5s, not 1s.
	f.slow.Store(0)
	waitFor(t, "the sync to end", func() bool {
		return counter(t, "equinix_metal_lbmodule_syncs_total", "success")-before == 2
	})
	f.r.MarkDirty()
	f.step(t, time.Second)
	time.Sleep(50 * time.Millisecond)
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("a sync 1s after one that took 5s: %d calls, want 2", n)
	}
	f.clock.Step(4 * time.Second)
	waitFor(t, "the spaced sync", func() bool { return f.calls.Load() == 3 })
}

// A change is synced a debounce after the last sync ended, not after it
// began: a sync that waited long for the API server (under a burst's load)
// would otherwise be followed at once by the next, and the burst's Service
// updates keep syncs going back to back.
func TestDebounceCountsFromTheEnd(t *testing.T) {
	kube := kubefake.NewClientset()
	var fp atomic.Pointer[fixture]
	var slowList atomic.Bool
	slowList.Store(true)
	// The first sync lists the nodes (once per process): that list takes 3s
	// of the fake clock, waiting time, not busy.
	kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if slowList.Swap(false) {
			for fp.Load() == nil {
				time.Sleep(time.Millisecond) // newFixtureWith has not returned yet
			}
			fp.Load().clock.Step(3 * time.Second)
		}
		return false, nil, nil
	})
	f := newFixtureWith(t, false, kube)
	fp.Store(f)
	f.waitEnded(t, 1)
	f.r.MarkDirty()
	f.step(t, lbmodule.GatherDelay)
	time.Sleep(50 * time.Millisecond)
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("a change right after a sync that began 3s ago: %d calls, want 1 until a debounce after its end", n)
	}
	f.clock.Step(time.Second - lbmodule.GatherDelay)
	waitFor(t, "the debounced sync", func() bool { return f.calls.Load() == 2 })
}

// A change while a sync runs waits a debounce after that sync's end. Asked
// for at once, the queue's timer fired during the sync and the next sync
// began the moment it ended: syncs back to back under a stream of changes.
func TestChangeDuringASyncWaitsForItsEnd(t *testing.T) {
	f := newFixture(t, false)
	f.waitEnded(t, 1)
	during := func() {
		f.r.MarkDirty()
		// The sync goes on for a while: past the gather delay.
		f.clock.Step(100 * time.Millisecond)
	}
	f.during.Store(&during)
	f.r.MarkDirty()
	f.step(t, time.Second)
	waitFor(t, "the sync the change is made in", func() bool { return f.calls.Load() >= 2 })
	time.Sleep(100 * time.Millisecond) // it ends; a sync queued at once would start now
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("a change made during a sync: %d calls at that sync's end, want 2 until a debounce after it", n)
	}
	f.step(t, time.Second)
	waitFor(t, "the debounced sync", func() bool { return f.calls.Load() == 3 })
}

func TestFailedSyncIsRetriedWithBackoff(t *testing.T) {
	before := counter(t, "equinix_metal_lbmodule_syncs_total", "snapshot")
	f := newFixture(t, true)
	waitFor(t, "the initial sync to fail", func() bool { return f.r.LastError() != nil })
	if reason := lbmodule.FailureReason(f.r.LastError()); reason != "snapshot" {
		t.Fatalf("last error %v (reason %s), want a snapshot failure", f.r.LastError(), reason)
	}
	f.step(t, 10*time.Second) // first backoff
	waitFor(t, "the first retry", func() bool { return f.calls.Load() == 2 })
	f.fail.Store(false)
	f.step(t, 20*time.Second) // backoff doubled
	waitFor(t, "the second retry", func() bool { return f.calls.Load() == 3 })
	waitFor(t, "success", func() bool { return f.r.LastError() == nil })
	if got := counter(t, "equinix_metal_lbmodule_syncs_total", "snapshot") - before; got != 2 {
		t.Errorf("syncs_total{result=snapshot} grew by %v, want 2", got)
	}
}

// awaitAfterQuiet calls AwaitSync a minute after the last sync, lets the
// sync it asks for run, and fails the test unless AwaitSync reports it.
func (f *fixture) awaitAfterQuiet(t *testing.T) {
	t.Helper()
	waitFor(t, "the last sync to end", func() bool { return !f.r.Running() })
	f.clock.Step(time.Minute)
	done := make(chan bool)
	go func() { done <- f.r.AwaitSync(context.Background()) }()
	f.step(t, lbmodule.GatherDelay)
	awaitReturned(t, done, "AwaitSync did not return after the sync it asked for")
}

// awaitReturned fails the test unless AwaitSync, run into done, returns
// true within 10 s; stuck says what its still waiting means.
func awaitReturned(t *testing.T, done <-chan bool, stuck string) {
	t.Helper()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("AwaitSync reported no sync")
		}
	case <-time.After(10 * time.Second):
		t.Fatal(stuck)
	}
}

// AwaitSync returns once a sync that began after the call has ended (a
// change made before the call is in it), and false when its context ends
// first.
func TestAwaitSync(t *testing.T) {
	f := newFixture(t, false)
	f.waitEnded(t, 1)
	f.awaitAfterQuiet(t)
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d syncs when AwaitSync returned, want 2 (the initial one and one after the call)", n)
	}

	// No sync can start (the debounce holds the next one back and the
	// clock stands still): the context decides.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if f.r.AwaitSync(ctx) {
		t.Fatal("AwaitSync reported a sync that never ran")
	}
}

// A sync someone waits for (a new Service's pool) comes a quarter of the
// debounce after the last one began, not the whole debounce: in a burst,
// the Services staged while a sync ran waited a second for the next.
func TestAwaitedSyncWaitsAQuarterDebounce(t *testing.T) {
	f := newFixture(t, false)
	f.waitEnded(t, 1)
	f.awaitAfterQuiet(t) // a sync begins now; the clock stands still
	done := make(chan bool)
	go func() { done <- f.r.AwaitSync(context.Background()) }()
	f.step(t, lbmodule.GatherDelay)
	time.Sleep(50 * time.Millisecond)
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("AwaitSync %v after a sync began: %d calls, want 2 until a quarter of the debounce has passed", lbmodule.GatherDelay, n)
	}
	f.clock.Step(time.Second/4 - lbmodule.GatherDelay)
	awaitReturned(t, done, "no sync a quarter of the debounce after the last began: AwaitSync still waits")
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("%d syncs when AwaitSync returned, want 3", n)
	}
}

// A change made while a sync still reads (before its snapshot) is in that
// sync's snapshot: AwaitSync returns once that sync has written, and asks
// for no other. In a burst, the Services staged during a sync's reads
// waited for the whole next sync before. The initial sync's read of the
// kinds record is held here.
func TestAwaitSyncDuringReadsIsThatSync(t *testing.T) {
	kube := kubefake.NewClientset()
	reading := make(chan struct{})
	release := make(chan struct{})
	var once atomic.Bool
	kube.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if once.CompareAndSwap(false, true) {
			close(reading)
			<-release
		}
		return false, nil, nil
	})
	f := newFixtureWith(t, false, kube)
	select {
	case <-reading:
	case <-time.After(30 * time.Second):
		t.Fatal("the initial sync did not read the kinds record")
	}
	done := make(chan bool)
	go func() { done <- f.r.AwaitSync(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // AwaitSync has looked
	close(release)
	awaitReturned(t, done, "AwaitSync called while the sync read still waits: it was not answered by that sync")
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d snapshots when AwaitSync returned, want 1 (the sync that was reading)", n)
	}
	// Nothing else was asked for: a minute later, still one sync.
	f.clock.Step(time.Minute)
	time.Sleep(100 * time.Millisecond)
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d snapshots a minute later, want 1: AwaitSync asked for a sync it did not need", n)
	}
}

// AwaitSync returns once the sync's objects are written, not after the
// rest of the sync: the first sync that reaches the node annotations
// lists the nodes, and that list is held until the test ends.
func TestAwaitSyncReturnsOnceWritten(t *testing.T) {
	kube := kubefake.NewClientset()
	var hold atomic.Bool
	release := make(chan struct{})
	kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if hold.Load() {
			<-release
		}
		return false, nil, nil
	})
	// The initial sync fails before it writes anything, so the next one
	// is the first to list the nodes.
	f := newFixtureWith(t, true, kube)
	t.Cleanup(func() { close(release) })
	waitFor(t, "the initial sync to fail", func() bool { return f.r.LastError() != nil })
	f.fail.Store(false)
	hold.Store(true)
	ended := counter(t, "equinix_metal_lbmodule_syncs_total", "success")

	done := make(chan bool)
	go func() { done <- f.r.AwaitSync(context.Background()) }()
	// The clock stands still until the sync AwaitSync asked for may start.
	giveUp := time.After(30 * time.Second)
	for returned := false; !returned; {
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("AwaitSync reported no sync")
			}
			returned = true
		case <-time.After(50 * time.Millisecond):
			f.clock.Step(lbmodule.GatherDelay)
		case <-giveUp:
			t.Fatal("AwaitSync did not return while the sync's node annotations were held: it waits for the whole sync")
		}
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d syncs when AwaitSync returned, want 2 (the failed initial one and the one it asked for)", n)
	}
	if got := counter(t, "equinix_metal_lbmodule_syncs_total", "success"); got != ended {
		t.Fatal("AwaitSync returned after the sync ended; want once its objects were written, while the node annotations are still held")
	}
}

// A module that annotates no node has the nodes listed once, by the first
// sync, not by every sync (a list of every Node at 1,000 nodes).
func TestNodesListedOnceWithoutAnnotations(t *testing.T) {
	kube := kubefake.NewClientset()
	var lists atomic.Int32
	kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	f := newFixtureWith(t, false, kube)
	f.waitEnded(t, 1)
	f.awaitAfterQuiet(t)
	f.awaitAfterQuiet(t)
	f.waitEnded(t, 3)
	if n := lists.Load(); n != 1 {
		t.Fatalf("the nodes were listed %d times over 3 syncs, want 1", n)
	}
}

// A failing sync ends the wait too: the caller is not held for a module
// that cannot run.
func TestAwaitSyncEndsOnFailure(t *testing.T) {
	f := newFixture(t, false)
	f.waitEnded(t, 1)
	f.fail.Store(true)
	f.awaitAfterQuiet(t)
	if f.r.LastError() == nil {
		t.Fatal("the sync AwaitSync waited for did not fail")
	}
}
