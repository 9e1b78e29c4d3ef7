package eip

import (
	"context"
	"testing"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// orphanProject is a project's reservations in memory, for the watcher's
// timing rules; the integration tests (host/provider) run it for real.
type orphanProject struct {
	reservations []metalv1.IPReservation
	deleted      []string
}

func (p *orphanProject) Reservations(context.Context) ([]metalv1.IPReservation, error) {
	return p.reservations, nil
}

func (p *orphanProject) DeleteIP(_ context.Context, id string) error {
	p.deleted = append(p.deleted, id)
	var kept []metalv1.IPReservation
	for _, r := range p.reservations {
		if r.GetId() != id {
			kept = append(kept, r)
		}
	}
	p.reservations = kept
	return nil
}

func TestOrphanWatcherGrace(t *testing.T) {
	const cluster = "uid"
	web := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	type step struct {
		at           time.Duration // since the start
		informer     bool          // web is in the informer's cache
		live         bool          // web exists on the API server
		wantReleased bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"released once the grace period is over", []step{
			{at: 0}, {at: 5 * time.Minute}, {at: 10 * time.Minute, wantReleased: true},
		}},
		{"a Service back within the grace period starts the clock again", []step{
			{at: 0}, {at: 5 * time.Minute, informer: true, live: true}, {at: 6 * time.Minute},
			{at: 12 * time.Minute}, {at: 16 * time.Minute, wantReleased: true},
		}},
		{"a Service the informer has not seen yet is not robbed", []step{
			{at: 0}, {at: 10 * time.Minute, live: true}, {at: 11 * time.Minute, live: true}, {at: 20 * time.Minute, live: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
			clock := clocktesting.NewFakePassiveClock(start)
			p := &orphanProject{reservations: []metalv1.IPReservation{
				{Id: metalv1.PtrString("r1"), Address: metalv1.PtrString("198.51.100.1"), Tags: Tags(cluster, "default", "web")},
				{Id: metalv1.PtrString("r2"), Address: metalv1.PtrString("198.51.100.2"), Tags: Tags("other", "default", "web")},
			}}
			var cur step
			list := func(present bool) []*v1.Service {
				if present {
					return []*v1.Service{web}
				}
				return nil
			}
			w := &OrphanWatcher{API: p, ClusterID: cluster, Release: true, Grace: 10 * time.Minute, Clock: clock,
				Services:     func() ([]*v1.Service, error) { return list(cur.informer), nil },
				LiveServices: func(context.Context) ([]*v1.Service, error) { return list(cur.live), nil },
			}
			for _, s := range tc.steps {
				cur = s
				clock.SetTime(start.Add(s.at))
				w.Check(context.Background())
				released := len(p.deleted) > 0
				if released != s.wantReleased {
					t.Fatalf("at +%s: released %v, want %v", s.at, released, s.wantReleased)
				}
			}
			for _, id := range p.deleted {
				if id != "r1" {
					t.Errorf("released %s, another cluster's", id)
				}
			}
		})
	}
}
