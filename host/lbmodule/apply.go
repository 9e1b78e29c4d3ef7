package lbmodule

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"maps"
	"sync"

	"golang.org/x/sync/errgroup"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// apply writes the desired state: server-side apply of every object (forced:
// the CCM owns these fields, as upstream overwrote them each loop; strict:
// a field the schema does not know is an error, not silently pruned), the
// new ones before the changed ones (writeChanged), then, only if all
// applied, deletion of owned objects no longer desired, then node
// annotations. An owned object whose body is what this process last
// applied, and which is still as that apply left it (version.unchanged: the
// same resourceVersion, or for a custom resource the same UID and
// generation, so that its controller's status updates do not count), is
// not applied again: at 10,000 Services a new Service then costs one
// write instead of 12,000. Anything else (a changed body, an object edited
// or deleted by someone else, a restart) is applied as before.
//
// apply consumes resp.Objects: each object is encoded only when its turn
// comes and dropped once encoded, so that at 10,000 Services the module's
// output is never held twice (as objects and as bodies) at once.
func (r *Reconciler) apply(ctx context.Context, d sdk.Description, resp sdk.GenerateResponse, pre *listed, phases *phaseClock, seq int64) error {
	targets, desired, mergeTargets, err := r.resolveTargets(d, resp.Objects)
	if err != nil {
		return err
	}
	owned := ownedKinds(targets, mergeTargets)
	if err := r.recordKinds(ctx, owned); err != nil {
		return r.applyErr("%v", err)
	}
	// The owned objects as they were before the module's call (readAndList),
	// to tell whether one is still as this process last applied it; a kind
	// not listed then is listed now.
	err = r.listMissing(ctx, pre, owned)
	phases.end("live")
	if err != nil {
		return err
	}
	live, unowned := pre.live, pre.unowned
	r.mu.Lock()
	last := r.applied
	r.mu.Unlock()
	next, err := r.writeChanged(ctx, targets, resp.Objects, mergeTargets, last, live, unowned)
	phases.end("write")
	if err != nil {
		r.rememberApplied(last, next)
		return err
	}
	r.rememberApplied(nil, next)
	// Everything the module wants is in: AwaitSync's callers go on.
	r.syncReached(seq)
	err = r.prune(ctx, d, desired, mergeTargets, live, pre.kinds, owned)
	phases.end("prune")
	if err != nil {
		return err
	}
	err = r.applyNodeAnnotations(ctx, resp.NodeAnnotations)
	phases.end("annotations")
	return err
}

// writeChanged applies the targets whose body or live object changed since
// this process last applied them (last), and returns what it now knows it
// applied; on an error, what it applied before it. It consumes targets'
// objects and objects (resolveTargets' input), one at a time.
//
// It makes before it breaks: first the objects that do not exist yet,
// then, once all of those are in, the changes to those that do (owned in
// live, or someone else's in unowned, such as upstream's that the module
// takes over). A reader that acts on each event, as MetalLB's speaker
// does, so never sees a change point at an object that is not there yet:
// taking over from upstream, the pools moved from upstream's
// advertisement to a per-metro one, and with both written at once the
// speakers sometimes saw the first change alone and withdrew every
// Service's route for a moment. The same holds for a peer that names a new
// Secret or BFDProfile. If a new object fails, no existing one is changed:
// what works keeps working until the sync succeeds.
func (r *Reconciler) writeChanged(ctx context.Context, targets []target, objects []sdk.Object, mergeTargets map[objectKey]bool, last map[objectKey]appliedObject, live map[objectKey]version, unowned map[objectKey]bool) (map[objectKey]appliedObject, error) {
	next := make(map[objectKey]appliedObject, len(targets))
	r.appliedLast = 0
	exists := func(t target) bool {
		_, owned := live[t.key]
		return owned || unowned[t.key] || mergeTargets[t.key]
	}
	for _, existing := range []bool{false, true} {
		if err := r.writeWave(ctx, targets, objects, func(t target) bool { return exists(t) == existing }, mergeTargets, last, live, next); err != nil {
			return next, err
		}
	}
	return next, nil
}

// writeWave applies the targets in wave that need it (see writeChanged),
// recording them in next.
//
// The writes go out applyWorkers at a time: one at a time, a burst of 50
// new Services' pools took seconds of round trips (each through MetalLB's
// webhook), and each Service's first packet waited behind the pools before
// its own. g.Go blocks while all are busy, so no more bodies than workers
// are held at once.
func (r *Reconciler) writeWave(ctx context.Context, targets []target, objects []sdk.Object, wave func(target) bool, mergeTargets map[objectKey]bool, last map[objectKey]appliedObject, live map[objectKey]version, next map[objectKey]appliedObject) error {
	var mu sync.Mutex // guards next and r.appliedLast
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(applyWorkers)
	for i, t := range targets {
		if gctx.Err() != nil {
			break // a write failed: its error is g.Wait's
		}
		if t.obj == nil || !wave(t) {
			continue // written in the other wave
		}
		body, err := r.encode(t, mergeTargets)
		// Both references to the object go, so it can be collected.
		targets[i].obj, objects[i] = nil, nil
		if err != nil {
			_ = g.Wait()
			return err
		}
		sum := sha256.Sum256(body)
		if prev, ok := last[t.key]; ok && prev.body == sum {
			if v, ok := live[t.key]; ok && prev.unchanged(v) {
				mu.Lock()
				next[t.key] = prev
				mu.Unlock()
				continue
			}
		}
		g.Go(func() error {
			out, err := r.applyObject(gctx, t, body)
			if err != nil {
				return r.applyErr("applying %s %s: %s%s", t.kind, qualified(t.key.namespace, t.key.name), wasmhost.OneLine(err.Error()), applyHint(err))
			}
			objectsApplied.Inc()
			mu.Lock()
			defer mu.Unlock()
			if !mergeTargets[t.key] {
				next[t.key] = appliedObject{sum, version{out.GetResourceVersion(), out.GetUID(), out.GetGeneration()}}
			}
			r.appliedLast++
			return nil
		})
	}
	err := g.Wait()
	if err == nil {
		err = ctx.Err() // stopped between two writes
	}
	return err
}

// applyWorkers is how many server-side applies of one sync are in flight
// at once: enough to hide the round trips of a burst, few enough that the
// API server (and the webhook behind it) sees a handful of writers.
const applyWorkers = 8

// target is one object to apply: its mapping, key and kind, and the
// object as the module gave it.
type target struct {
	m    *meta.RESTMapping
	key  objectKey
	kind string
	obj  sdk.Object
}

// resolveTargets resolves everything the module wants (targets[i] is
// objects[i]), so that a kind the cluster lacks or a wrong scope fails
// before the first write, not halfway. mergeTargets are the objects the
// module reads by name and merges into (not owned). Apply and Plan share
// it.
func (r *Reconciler) resolveTargets(d sdk.Description, objects []sdk.Object) (targets []target, desired, mergeTargets map[objectKey]bool, err error) {
	mergeTargets = map[objectKey]bool{}
	for _, rd := range d.Reads {
		if rd.Name != "" {
			mergeTargets[objectKey{schema.FromAPIVersionAndKind(rd.APIVersion, rd.Kind), rd.Namespace, rd.Name}] = true
		}
	}
	desired = make(map[objectKey]bool, len(objects))
	targets = make([]target, 0, len(objects))
	for _, o := range objects {
		gvk := schema.FromAPIVersionAndKind(o.APIVersion(), o.Kind())
		key := objectKey{gvk, o.Namespace(), o.Name()}
		desired[key] = true
		m, err := r.mapping(gvk)
		if err != nil {
			return nil, nil, nil, r.applyErr("cannot apply %s %s: the cluster does not serve %s (%v); install the CRDs the module needs (for MetalLB, install MetalLB)", o.Kind(), qualified(key.namespace, key.name), o.APIVersion(), err)
		}
		if namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace; namespaced != (key.namespace != "") {
			return nil, nil, nil, r.applyErr("declares %s %s with the wrong scope: the cluster has it %s; declare a namespace in describe exactly for namespaced kinds", o.APIVersion(), o.Kind(), map[bool]string{true: "namespaced", false: "cluster-scoped"}[namespaced])
		}
		targets = append(targets, target{m, key, o.Kind(), o})
	}
	return targets, desired, mergeTargets, nil
}

// encode is the body to apply for t: the object with the owned label
// (unless the module merges into an object it does not own). The label
// goes into copies of the three maps on its path, never into the module's
// object, and nothing else is copied.
func (r *Reconciler) encode(t target, mergeTargets map[objectKey]bool) ([]byte, error) {
	obj := map[string]any(t.obj)
	if !mergeTargets[t.key] {
		obj = withOwnedLabel(obj)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, r.applyErr("encoding %s %s: %v", t.kind, t.key.name, err)
	}
	return body, nil
}

// withOwnedLabel returns obj with sdk.OwnedLabel set in its labels, sharing
// everything but the object's, its metadata's and its labels' maps.
// Validation has made sure metadata is an object and labels, if any, an
// object of strings.
func withOwnedLabel(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	out := maps.Clone(obj)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]any{}
	}
	labels[sdk.OwnedLabel] = sdk.OwnedValue
	md["labels"] = labels
	out["metadata"] = md
	return out
}

// listMissing lists into pre the kinds in owned it does not have.
func (r *Reconciler) listMissing(ctx context.Context, pre *listed, owned map[kindKey]bool) error {
	var missing []kindKey
	for _, k := range sortedKeys(owned) {
		if !pre.kinds[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	jobs, err := r.listJobs(missing)
	if err != nil {
		return err
	}
	if failed := pre.run(ctx, r, jobs); len(failed) > 0 {
		return failed[0]
	}
	return nil
}

// ownedKinds are the kinds (and namespaces) of the owned objects in targets.
func ownedKinds(targets []target, mergeTargets map[objectKey]bool) map[kindKey]bool {
	owned := map[kindKey]bool{}
	for _, t := range targets {
		if !mergeTargets[t.key] {
			owned[kindKey{t.key.gvk.GroupVersion().String(), t.key.gvk.Kind, t.key.namespace}] = true
		}
	}
	return owned
}

// rememberApplied records what this sync applied. After a failed apply,
// keep also what the previous sync had applied and this one did not reach.
func (r *Reconciler) rememberApplied(previous, now map[objectKey]appliedObject) {
	for k, v := range previous {
		if _, ok := now[k]; !ok {
			now[k] = v
		}
	}
	r.mu.Lock()
	r.applied = now
	r.mu.Unlock()
}
