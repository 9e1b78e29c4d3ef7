// Package leaderlease gives the leader's Lease up when the process is told
// to stop, so that a rolling upgrade hands the CCM over at once.
//
// k8s.io/cloud-provider runs leader election with a context that is never
// cancelled and without ReleaseOnCancel, and the process had no SIGTERM
// handler: a leader replaced by kubelet died holding its Lease, and its
// successor waited for the Lease to run out (15 s by default) before it
// could act. The framework does not tell the process its own identity (a
// host name and a random suffix; with hostNetwork, two pods on one node
// share the host name), so the Releaser reads it from the Lease at the
// moment the framework starts the controllers, which it does only in the
// leader, and releases only a Lease that still names it.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package leaderlease

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Releaser remembers the identity that holds the Lease once this process
// leads, and releases the Lease on shutdown.
type Releaser struct {
	leases          coordinationclient.LeasesGetter
	namespace, name string

	mu     sync.Mutex
	holder string
}

// New returns a Releaser of the Lease namespace/name.
func New(leases coordinationclient.LeasesGetter, namespace, name string) *Releaser {
	return &Releaser{leases: leases, namespace: namespace, name: name}
}

// Leading records the Lease's holder: the framework calls the controllers'
// start functions only after this process acquired the Lease, and a
// renewal never changes the holder, so the holder read now is this
// process. Only the first call reads.
func (r *Releaser) Leading(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder != "" {
		return nil
	}
	l, err := r.leases.Leases(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Lease %s/%s to learn this leader's identity: %w", r.namespace, r.name, err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return fmt.Errorf("the Lease %s/%s has no holder although this process leads", r.namespace, r.name)
	}
	r.holder = *l.Spec.HolderIdentity
	return nil
}

// Holder is the identity Leading recorded, "" before.
func (r *Releaser) Holder() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holder
}

// Release gives the Lease up if it still names this process, as
// client-go's ReleaseOnCancel does: no holder, a one-second duration, so
// that the next candidate takes it at its next retry. The update carries
// the read's resourceVersion: if another process took the Lease meanwhile,
// it is left alone. It reports whether it released.
func (r *Releaser) Release(ctx context.Context) (bool, error) {
	holder := r.Holder()
	if holder == "" {
		return false, nil
	}
	leases := r.leases.Leases(r.namespace)
	l, err := leases.Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading Lease %s/%s to release it: %w", r.namespace, r.name, err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
		return false, nil
	}
	released(l, time.Now())
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("releasing Lease %s/%s: %w", r.namespace, r.name, err)
	}
	return true, nil
}

// released turns l into the record client-go writes when it releases: the
// transitions count kept, no holder, expiring one second after now.
func released(l *coordinationv1.Lease, now time.Time) {
	empty, one := "", int32(1)
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &empty
	l.Spec.LeaseDurationSeconds = &one
	l.Spec.AcquireTime = &t
	l.Spec.RenewTime = &t
}
