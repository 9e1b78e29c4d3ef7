package lbmodule

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Sync runs one full cycle: snapshot, read, generate, validate, apply,
// prune. Nothing is written unless generate and validation succeed.
func (r *Reconciler) Sync(ctx context.Context) (err error) {
	var req sdk.GenerateRequest
	seq := r.begun.Add(1)
	began := r.cfg.Clock.Now()
	r.lastStart.Store(began.UnixNano())
	busy := time.Duration(-1)
	defer func() {
		if busy < 0 {
			busy = r.cfg.Clock.Since(began)
		}
		r.lastBusy.Store(int64(busy))
		r.lastEnd.Store(r.cfg.Clock.Now().UnixNano())
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
		r.syncReached(seq)
		if err == nil {
			syncsTotal.WithLabelValues("success").Inc()
			healthy.Set(1)
			lastSuccess.Set(float64(r.cfg.Clock.Now().Unix()))
			r.failures.succeeded()
			return
		}
		if ctx.Err() != nil {
			return
		}
		syncsTotal.WithLabelValues(string(failureReason(err))).Inc()
		healthy.Set(0)
		r.failures.failed(err, r.queue.NumRequeues(queueKey)+1)
	}()

	r.takeNextModule(ctx)
	// Mappings are cached for this sync only: a CRD installed or removed
	// is seen by the next one.
	r.mappings = map[schema.GroupVersionKind]*meta.RESTMapping{}
	defer func() { r.mappings = nil }()
	phases := newPhaseClock(r.cfg.Clock.Now)
	defer func() {
		if err == nil {
			r.log.V(2).Info("Load-balancer module synced", append([]any{"services", len(req.Services), "nodes", len(req.Nodes), "applied", r.appliedLast}, phases.keysAndValues()...)...)
		}
	}()
	req, err = r.cfg.Snapshot(ctx)
	phases.end("snapshot")
	if err != nil {
		return r.snapshotErr(err)
	}
	// The Services and BGP nodes are what they are whatever the module
	// makes of them: the check does not wait for generate or apply.
	if a := r.cfg.Announcements; a != nil {
		a.Observe(req)
	}
	desc := r.cfg.Module.Describe()
	req.Existing, err = r.read(ctx, desc)
	phases.end("read")
	if err != nil {
		return r.applyErr("reading the objects it asked for: %v", err)
	}
	start := time.Now()
	resp, err := r.cfg.Module.Generate(ctx, req)
	generateDuration.Observe(time.Since(start).Seconds())
	phases.end("generate")
	// The work that costs this process CPU ends here; applying is
	// waiting for the API server (MarkDirty spaces syncs by the former).
	busy = r.cfg.Clock.Since(began)
	if err != nil {
		return err
	}
	for _, w := range resp.Warnings {
		r.log.Info("Load-balancer module warning", "warning", w)
	}
	return r.apply(ctx, desc, resp, phases, seq)
}

// phaseClock times the phases of one sync, each from the end of the one
// before, into syncPhaseDuration and the sync's log line: snapshot, read,
// generate, then apply's live (listing what is there), write, prune and
// annotations.
type phaseClock struct {
	now  func() time.Time
	last time.Time
	kv   []any
}

func newPhaseClock(now func() time.Time) *phaseClock {
	return &phaseClock{now: now, last: now()}
}

func (p *phaseClock) end(phase string) {
	t := p.now()
	d := t.Sub(p.last)
	p.last = t
	syncPhaseDuration.WithLabelValues(phase).Observe(d.Seconds())
	p.kv = append(p.kv, phase, d.Round(time.Millisecond).String())
}

func (p *phaseClock) keysAndValues() []any { return p.kv }

// read fetches what the module declared it reads. A kind the cluster does
// not have (MetalLB not installed) reads as no objects.
func (r *Reconciler) read(ctx context.Context, d sdk.Description) ([]sdk.Object, error) {
	var out []sdk.Object
	for _, rd := range d.Reads {
		m, err := r.mapping(schema.FromAPIVersionAndKind(rd.APIVersion, rd.Kind))
		if meta.IsNoMatchError(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		res := r.resource(m, rd.Namespace)
		var items []unstructured.Unstructured
		if rd.Name != "" {
			u, err := res.Get(ctx, rd.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				return nil, err
			}
			items = append(items, *u)
		} else {
			l, err := res.List(ctx, metav1.ListOptions{LabelSelector: rd.LabelSelector})
			if err != nil {
				return nil, err
			}
			items = l.Items
		}
		for _, u := range items {
			unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
			out = append(out, sdk.Object(u.Object))
		}
	}
	sdk.SortObjects(out)
	return out, nil
}
