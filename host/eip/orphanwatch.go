package eip

import (
	"context"
	"sync"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// orphanAPI is what the orphan watcher needs from Equinix Metal.
type orphanAPI interface {
	// Reservations returns the cached reservations of the project (the
	// watcher runs right after a full refresh, so they are fresh).
	Reservations(ctx context.Context) ([]metalv1.IPReservation, error)
	DeleteIP(ctx context.Context, id string) error
}

// OrphanWatcher reports, after every full refresh of the reservation cache,
// the cluster's reservations whose Service is gone, and with Release set
// releases those that stayed orphaned for Grace.
type OrphanWatcher struct {
	API       orphanAPI
	ClusterID string
	// Services lists the cluster's Services from the informer cache;
	// Synced tells whether that cache is complete. Nothing is reported
	// before it is: an empty cache would make orphans of every reservation.
	Services func() ([]*v1.Service, error)
	Synced   func() bool
	// LiveServices lists the Services from the API server itself. Before
	// releasing, the watcher asks it once more, so a Service recreated
	// since the informer last heard keeps its address.
	LiveServices func(ctx context.Context) ([]*v1.Service, error)
	Release      bool
	Grace        time.Duration
	Clock        clock.PassiveClock

	mu        sync.Mutex
	firstSeen map[string]time.Time // reservation ID → first refresh that found it orphaned
}

var (
	orphansGauge = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "eip", Name: "orphans",
		Help:           "Service Elastic IP reservations of this cluster whose Service no longer exists, as of the last full refresh of the reservation cache.",
		StabilityLevel: metrics.ALPHA,
	})
	orphansReleased = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "equinix_metal", Subsystem: "eip", Name: "orphans_released_total",
		Help:           "Orphaned Service Elastic IP reservations released (orphanEIPs=release, after orphanEIPGrace).",
		StabilityLevel: metrics.ALPHA,
	})
	orphanOnce sync.Once
)

func registerOrphanMetrics() {
	orphanOnce.Do(func() { legacyregistry.MustRegister(orphansGauge, orphansReleased) })
}

// Check runs one round: find, report, and (with Release) release what has
// been orphaned for Grace. It returns the orphans found.
func (w *OrphanWatcher) Check(ctx context.Context) []Orphan {
	registerOrphanMetrics()
	if w.Synced != nil && !w.Synced() {
		return nil
	}
	all, err := w.API.Reservations(ctx)
	if err != nil {
		klog.ErrorS(err, "Looking for orphaned Elastic IPs failed; trying again at the next refresh")
		return nil
	}
	svcs, err := w.Services()
	if err != nil {
		klog.ErrorS(err, "Looking for orphaned Elastic IPs failed; trying again at the next refresh")
		return nil
	}
	orphans := FindOrphans(all, w.ClusterID, svcs)
	now := w.clock().Now()
	w.mu.Lock()
	seen := make(map[string]time.Time, len(orphans))
	for _, o := range orphans {
		t, ok := w.firstSeen[o.ID]
		if !ok {
			t = now
		}
		seen[o.ID] = t
	}
	// An orphan that is no longer one (its Service came back) starts over.
	w.firstSeen = seen
	w.mu.Unlock()

	orphansGauge.Set(float64(len(orphans)))
	if len(orphans) > 0 {
		klog.InfoS("Elastic IP reservations of this cluster have no Service (orphans)", "count", len(orphans),
			"addresses", addresses(orphans), "mode", w.mode(), "grace", w.Grace)
	}
	if w.Release {
		w.release(ctx, orphans, seen, now)
	}
	return orphans
}

func (w *OrphanWatcher) release(ctx context.Context, orphans []Orphan, seen map[string]time.Time, now time.Time) {
	var due []Orphan
	for _, o := range orphans {
		if now.Sub(seen[o.ID]) >= w.Grace {
			due = append(due, o)
		}
	}
	if len(due) == 0 {
		return
	}
	live, err := w.LiveServices(ctx)
	if err != nil {
		klog.ErrorS(err, "Not releasing orphaned Elastic IPs: cannot list the Services to check them again")
		return
	}
	tags := ownerTagSet(live)
	for _, o := range due {
		if tags[o.Owner] {
			klog.InfoS("Not releasing an Elastic IP: its Service exists again", "address", o.Address, "id", o.ID)
			w.forget(o.ID)
			continue
		}
		if err := w.API.DeleteIP(ctx, o.ID); err != nil {
			klog.ErrorS(err, "Releasing an orphaned Elastic IP failed; trying again at the next refresh", "address", o.Address, "id", o.ID)
			continue
		}
		orphansReleased.Inc()
		w.forget(o.ID)
		klog.InfoS("Released an orphaned Elastic IP (its Service is gone)", "address", o.Address, "id", o.ID, "orphanedFor", now.Sub(seen[o.ID]).Round(time.Second))
	}
}

func (w *OrphanWatcher) forget(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.firstSeen, id)
}

func (w *OrphanWatcher) mode() string {
	if w.Release {
		return "release"
	}
	return "report"
}

func (w *OrphanWatcher) clock() clock.PassiveClock {
	if w.Clock == nil {
		return clock.RealClock{}
	}
	return w.Clock
}

func addresses(os []Orphan) []string {
	out := make([]string, 0, len(os))
	for _, o := range os {
		out = append(out, o.Address)
	}
	return out
}
