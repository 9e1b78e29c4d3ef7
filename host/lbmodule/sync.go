package lbmodule

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/watchcache"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Sync runs one full cycle: read, snapshot, generate, validate, apply,
// prune. Nothing is written unless generate and validation succeed.
//
// The reads come before the snapshot: they wait for the API server (a
// second under a burst's load), and a Service staged meanwhile is in the
// snapshot taken after them, so its AwaitSync is answered by this sync
// rather than the next (the sync is numbered when it takes its snapshot).
func (r *Reconciler) Sync(ctx context.Context) (err error) {
	var req sdk.GenerateRequest
	var seq int64
	r.beginSync()
	began := r.cfg.Clock.Now()
	r.lastStart.Store(began.UnixNano())
	phases := newPhaseClock(r.cfg.Clock.Now)
	defer func() {
		r.lastBusy.Store(int64(phases.busy))
		r.lastEnd.Store(r.cfg.Clock.Now().UnixNano())
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
		if seq == 0 {
			seq = r.snapshotTaken() // ended before its snapshot: its waiters go on
		}
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
	defer func() {
		if err == nil {
			r.log.V(2).Info("Load-balancer module synced", append([]any{"services", len(req.Services), "nodes", len(req.Nodes), "applied", r.appliedLast}, phases.keysAndValues()...)...)
		}
	}()
	desc := r.cfg.Module.Describe()
	existing, pre, err := r.readAndList(ctx, desc)
	phases.end("read")
	if err != nil {
		return r.applyErr("reading the objects it asked for: %v", err)
	}
	seq = r.snapshotTaken()
	req, err = r.cfg.Snapshot(ctx)
	phases.end("snapshot")
	if err != nil {
		return r.snapshotErr(err)
	}
	req.Existing = existing
	// The Services and BGP nodes are what they are whatever the module
	// makes of them: the check does not wait for generate or apply.
	if a := r.cfg.Announcements; a != nil {
		a.Observe(req)
	}
	start := time.Now()
	resp, err := r.cfg.Module.Generate(ctx, req)
	generateDuration.Observe(time.Since(start).Seconds())
	phases.end("generate")
	if err != nil {
		return err
	}
	for _, w := range resp.Warnings {
		r.log.Info("Load-balancer module warning", "warning", w)
	}
	return r.apply(ctx, desc, resp, pre, phases, seq)
}

// phaseClock times the phases of one sync, each from the end of the one
// before, into syncPhaseDuration and the sync's log line: read (the declared
// reads and the lists of what is there, at once: readAndList), snapshot,
// generate, then apply's live (listing a kind read did not),
// write, prune and annotations.
type phaseClock struct {
	now  func() time.Time
	last time.Time
	kv   []any
	// busy is the time of the phases that cost this process CPU (busyPhases),
	// by which MarkDirty spaces syncs.
	busy time.Duration
}

// busyPhases are the phases that cost this process CPU: building the
// module's input from the informers and calling the module (at 10,000
// Services, seconds). The others wait for the API server: counting the
// read phase (three small lists, a second under a burst's load) held the
// next sync, and every Service staged for it, back that much longer.
var busyPhases = map[string]bool{"snapshot": true, "generate": true}

func newPhaseClock(now func() time.Time) *phaseClock {
	return &phaseClock{now: now, last: now()}
}

func (p *phaseClock) end(phase string) {
	t := p.now()
	d := t.Sub(p.last)
	p.last = t
	if busyPhases[phase] {
		p.busy += d
	}
	syncPhaseDuration.WithLabelValues(phase).Observe(d.Seconds())
	p.kv = append(p.kv, phase, d.Round(time.Millisecond).String())
}

func (p *phaseClock) keysAndValues() []any { return p.kv }

// read fetches what the module declared it reads. A kind the cluster does
// not have (MetalLB not installed) reads as no objects. The reads go out
// at once (listWorkers at most): each is a round trip, and under a
// burst's load three small lists one after the other took a second.
func (r *Reconciler) read(ctx context.Context, d sdk.Description) ([]sdk.Object, error) {
	jobs, err := r.readJobs(d)
	if err != nil {
		return nil, err
	}
	return runReads(ctx, jobs)
}

// readJob is one declared read, its mapping resolved, and what the watch
// (r.watch) had of it, if it had it (watched).
type readJob struct {
	rd      sdk.ObjectRead
	res     dynamic.ResourceInterface
	watched []unstructured.Unstructured
	served  bool
}

// readJobs resolves the declared reads' mappings, in the sync goroutine
// (r.mappings is its alone).
func (r *Reconciler) readJobs(d sdk.Description) ([]readJob, error) {
	var jobs []readJob
	for _, rd := range d.Reads {
		m, err := r.mapping(schema.FromAPIVersionAndKind(rd.APIVersion, rd.Kind))
		if meta.IsNoMatchError(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		j := readJob{rd: rd, res: r.resource(m, rd.Namespace)}
		j.watched, j.served = r.watched(m, rd)
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// watched is a declared read from r.watch, if the watch has it whole. A
// read by name is never watched: the CCM may be allowed that one object
// alone (the legacy MetalLB ConfigMap), and a get is one small round trip.
func (r *Reconciler) watched(m *meta.RESTMapping, rd sdk.ObjectRead) ([]unstructured.Unstructured, bool) {
	if r.watch == nil || rd.Name != "" {
		return nil, false
	}
	objs, ok := r.watch.Objects(watchcache.Selection{Resource: m.Resource, Namespace: rd.Namespace, LabelSelector: rd.LabelSelector})
	if !ok {
		return nil, false
	}
	out := make([]unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = *o
	}
	return out, true
}

// runReads makes the reads, listWorkers at a time.
func runReads(ctx context.Context, jobs []readJob) ([]sdk.Object, error) {
	found := make([][]unstructured.Unstructured, len(jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listWorkers)
	for i, j := range jobs {
		if j.served {
			found[i] = j.watched
			continue
		}
		g.Go(func() error {
			var err error
			found[i], err = readOne(gctx, j.res, j.rd)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []sdk.Object
	for _, items := range found {
		for _, u := range items {
			unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
			out = append(out, sdk.Object(u.Object))
		}
	}
	sdk.SortObjects(out)
	return out, nil
}

// readOne is one declared read: the named object (none if it does not
// exist), or the objects its label selector matches.
func readOne(ctx context.Context, res dynamic.ResourceInterface, rd sdk.ObjectRead) ([]unstructured.Unstructured, error) {
	if rd.Name != "" {
		u, err := res.Get(ctx, rd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		return []unstructured.Unstructured{*u}, nil
	}
	l, err := res.List(ctx, metav1.ListOptions{LabelSelector: rd.LabelSelector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// listWorkers is how many of one sync's reads or lists are in flight at
// once: a module declares a handful of each.
const listWorkers = 4
