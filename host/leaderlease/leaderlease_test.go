package leaderlease

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

func lease(holder string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cloud-controller-manager"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](3)},
	}
}

func TestRelease(t *testing.T) {
	for _, tc := range []struct {
		name         string
		atLeading    string // the holder when Leading runs; "" skips Leading
		atRelease    string // the holder when Release runs
		wantReleased bool
		wantHolder   string
	}{
		{name: "the leader releases its own Lease", atLeading: "node-1_a", atRelease: "node-1_a", wantReleased: true, wantHolder: ""},
		// hostNetwork: the new pod on the same node has the same host name.
		{name: "a Lease taken meanwhile is left alone", atLeading: "node-1_a", atRelease: "node-1_b", wantHolder: "node-1_b"},
		{name: "a process that never led releases nothing", atRelease: "node-2_c", wantHolder: "node-2_c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientset()
			leases := c.CoordinationV1().Leases("kube-system")
			r := New(c.CoordinationV1(), "kube-system", "cloud-controller-manager")
			if tc.atLeading != "" {
				if _, err := leases.Create(ctx, lease(tc.atLeading), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := r.Leading(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := leases.Update(ctx, lease(tc.atRelease), metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			} else if _, err := leases.Create(ctx, lease(tc.atRelease), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := r.Release(ctx)
			if err != nil || got != tc.wantReleased {
				t.Fatalf("Release = %v, %v; want %v, nil", got, err, tc.wantReleased)
			}
			l, err := leases.Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != tc.wantHolder {
				t.Errorf("holder %q, want %q", h, tc.wantHolder)
			}
			if tc.wantReleased && (*l.Spec.LeaseDurationSeconds != 1 || *l.Spec.LeaseTransitions != 3) {
				t.Errorf("released Lease %+v, want a 1 s duration and the transitions kept", l.Spec)
			}
		})
	}
}

func TestLeadingNeedsAHolder(t *testing.T) {
	c := fake.NewClientset(lease(""))
	if err := New(c.CoordinationV1(), "kube-system", "cloud-controller-manager").Leading(context.Background()); err == nil {
		t.Fatal("Leading accepted a Lease without a holder")
	}
}

// TestHandOver runs client-go's leader election, as k8s.io/cloud-provider
// does (a 15 s Lease, never released by the framework), for two candidates
// against a real kube-apiserver: when the leader releases on shutdown, the
// other takes the Lease while the leader's Lease had most of its 15 s left.
func TestHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a kube-apiserver; run without -short")
	}
	env := testenv.New(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	leading := make(chan string, 2)
	elect := func(ctx context.Context, id string) {
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "cloud-controller-manager"},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
		go leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 500 * time.Millisecond,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { leading <- id },
				OnStoppedLeading: func() {},
			},
		})
	}
	// The first candidate leads; the second starts once it does.
	firstCtx, stopFirst := context.WithCancel(ctx)
	elect(firstCtx, "node-1_first")
	if id := <-leading; id != "node-1_first" {
		t.Fatalf("%s leads, want node-1_first", id)
	}
	r := New(kube.CoordinationV1(), "kube-system", "cloud-controller-manager")
	if err := r.Leading(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Holder() != "node-1_first" {
		t.Fatalf("Leading recorded %q, want node-1_first", r.Holder())
	}
	elect(ctx, "node-1_second")

	// Shutdown: the framework's elector is not stopped (the process
	// exits); the releaser gives the Lease up.
	stopFirst()
	before, err := kube.CoordinationV1().Leases("kube-system").Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if ok, err := r.Release(ctx); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if id := <-leading; id != "node-1_second" {
		t.Fatalf("%s leads, want node-1_second", id)
	}
	took := time.Since(released)
	after, err := kube.CoordinationV1().Leases("kube-system").Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expiry := before.Spec.RenewTime.Add(15 * time.Second)
	if !after.Spec.AcquireTime.Time.Before(expiry) {
		t.Errorf("the second candidate acquired at %v, after the first's Lease ran out (%v): the release did not hand over", after.Spec.AcquireTime.Time, expiry)
	}
	t.Logf("release → the other candidate leads: %v (the first's Lease had %v left)", took.Round(time.Millisecond), time.Until(expiry).Round(time.Second))
}
