package lbmodule

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

const (
	// EventReason is the reason of the Warning Event recorded, once per
	// cause, when a sync fails (see failureReporter).
	EventReason = "LoadBalancerModuleFailed"

	// DefaultDebounce gathers a burst of Service and node events into one
	// generate call.
	DefaultDebounce = time.Second
	queueKey        = "lbconfig"
)

// SnapshotFunc returns the current Services with addresses, BGP nodes with
// peers, and annotation templates. The reconciler fills the envelope, the
// options and Existing.
type SnapshotFunc func(ctx context.Context) (sdk.GenerateRequest, error)

// EventRecorder is the part of client-go's record.EventRecorder used here.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// ReconcilerConfig wires a Reconciler.
type ReconcilerConfig struct {
	Module  *wasmhost.Module
	Dynamic dynamic.Interface
	// Metadata lists objects as metadata only: the owned objects (to skip
	// unchanged ones and to prune) and the nodes (their annotations'
	// managers). At 10,000 Services a full list of the pools costs tens of
	// MB of decoding per sync; their metadata, a fraction. Nil lists
	// through Dynamic and Kube instead.
	Metadata metadata.Interface
	Kube     kubernetes.Interface
	Snapshot SnapshotFunc
	// Recorder receives the failure Events; nil records none.
	Recorder EventRecorder
	// EventObject is what the failure Events are recorded on; nil is
	// clusterevent.Object (the kube-system Namespace).
	EventObject *corev1.ObjectReference
	// Mapper resolves kinds to resources; nil builds one from Kube's
	// discovery, refreshed when a kind is not found (CRDs installed later).
	Mapper meta.RESTMapper
	// Debounce defaults to DefaultDebounce.
	Debounce time.Duration
	// RetryBase and RetryMax bound the exponential backoff after a failed
	// sync; they default to 1s and 5m.
	RetryBase, RetryMax time.Duration
	// Clock is for tests; the real clock if nil.
	Clock  clock.WithTicker
	Logger *klog.Logger
}

// Reconciler keeps the cluster at what the module generates: one worker,
// one generate call per burst of changes, nothing applied unless the whole
// output is valid, retries with backoff, and the last good state kept on
// failure.
type Reconciler struct {
	cfg    ReconcilerConfig
	mapper meta.RESTMapper
	reset  func()
	queue  workqueue.TypedRateLimitingInterface[string]
	log    klog.Logger
	// failures reports a failing sync once per cause.
	failures *failureReporter
	// lastDuration is how long the last sync took (time.Duration).
	lastDuration atomic.Int64

	// mappings caches RESTMappings within one sync: resolving one per
	// object (10,000 pools) is a lot of garbage for one answer per kind.
	mappings map[schema.GroupVersionKind]*meta.RESTMapping

	mu sync.Mutex
	// annotated are the nodes that carry annotations under
	// fieldmanager.ModuleNodeAnnotations; nil until the first sync has looked.
	annotated map[string]bool
	lastErr   error
	// record is the kinds record (prune.go) as last read or written; nil
	// until the first sync reads it.
	record map[kindKey]bool
	// applied is, per owned object, what this process last applied and the
	// resourceVersion the apiserver answered: while the object still has
	// that version and the module wants the same body, applying it again
	// would change nothing, so it is skipped.
	applied map[objectKey]appliedObject
	// next is a module to use from the next sync on (SetModule).
	next atomic.Pointer[wasmhost.Module]
}

type appliedObject struct {
	body [sha256.Size]byte
	rv   string
}

// NewReconciler checks cfg and builds a Reconciler; call Run to start it.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	if cfg.Module == nil || cfg.Dynamic == nil || cfg.Kube == nil || cfg.Snapshot == nil {
		return nil, errors.New("lbmodule.NewReconciler needs Module, Dynamic, Kube and Snapshot")
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = time.Second
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	r := &Reconciler{cfg: cfg, mapper: cfg.Mapper, reset: func() {}}
	if cfg.Logger != nil {
		r.log = *cfg.Logger
	} else {
		r.log = klog.Background()
	}
	r.log = r.log.WithValues("module", cfg.Module.Name())
	r.failures = newFailureReporter(cfg, r.log)
	if r.mapper == nil {
		m := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cfg.Kube.Discovery()))
		r.mapper, r.reset = m, m.Reset
	}
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.RetryBase, cfg.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "lbmodule", Clock: cfg.Clock})
	registerMetrics()
	return r, nil
}

// MarkDirty asks for a sync. Calls within the debounce window, and calls
// while a sync runs, add up to one more sync.
//
// The window is the debounce, or the duration of the last sync if that was
// longer: at 10,000 Services a sync takes seconds of CPU, and back-to-back
// syncs during a burst would keep a core busy with the module and starve
// the rest of the process (the leader lease's renewals among it). So the
// module gets at most about half of one core, and a burst still ends in
// one sync of the final state.
func (r *Reconciler) MarkDirty() {
	r.queue.AddAfter(queueKey, max(r.cfg.Debounce, time.Duration(r.lastDuration.Load())))
}

// Run syncs once at start, then whenever marked dirty, until ctx is done.
func (r *Reconciler) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	r.queue.Add(queueKey)
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		err := r.Sync(ctx)
		switch {
		case err == nil:
			r.queue.Forget(key)
		case ctx.Err() != nil:
		default:
			// Sync has reported the failure (once per cause).
			r.queue.AddRateLimited(key)
		}
		r.queue.Done(key)
	}
}

// SetModule replaces the module (a new version of a file module) from the
// next sync on, and asks for that sync. The sync in flight, if any,
// finishes with the module it started with; the replaced one is closed by
// the next sync, the only user of the module.
func (r *Reconciler) SetModule(m *wasmhost.Module) {
	if old := r.next.Swap(m); old != nil {
		_ = old.Close(context.Background()) // replaced before it was used
	}
	r.queue.Add(queueKey)
}

// takeNextModule switches to the module SetModule gave, if any.
func (r *Reconciler) takeNextModule(ctx context.Context) {
	m := r.next.Swap(nil)
	if m == nil {
		return
	}
	old := r.cfg.Module
	r.cfg.Module = m
	r.log.Info("Load-balancer module replaced", "sha256", m.SHA256(), "previous", old.SHA256())
	_ = old.Close(ctx)
}

// LastError is the error of the last sync, nil after a success.
func (r *Reconciler) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// Sync runs one full cycle: snapshot, read, generate, validate, apply,
// prune. Nothing is written unless generate and validation succeed.
func (r *Reconciler) Sync(ctx context.Context) (err error) {
	var req sdk.GenerateRequest
	began := r.cfg.Clock.Now()
	defer func() {
		r.lastDuration.Store(int64(r.cfg.Clock.Since(began)))
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
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
	req, err = r.cfg.Snapshot(ctx)
	if err != nil {
		return &wasmhost.Error{Module: r.cfg.Module.Name(), Reason: ReasonSnapshot, Msg: "cannot get its input: " + err.Error()}
	}
	desc := r.cfg.Module.Describe()
	if req.Existing, err = r.read(ctx, desc); err != nil {
		return r.applyErr("reading the objects it asked for: %v", err)
	}
	start := time.Now()
	resp, err := r.cfg.Module.Generate(ctx, req)
	generateDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return err
	}
	for _, w := range resp.Warnings {
		r.log.Info("Load-balancer module warning", "warning", w)
	}
	return r.apply(ctx, desc, resp)
}

func (r *Reconciler) applyErr(format string, args ...any) error {
	return &wasmhost.Error{Module: r.cfg.Module.Name(), Reason: ReasonApply, Msg: fmt.Sprintf(format, args...)}
}

func (r *Reconciler) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if m, ok := r.mappings[gvk]; ok {
		return m, nil
	}
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// The CRD may have been installed since discovery was cached.
		r.reset()
		m, err = r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err == nil && r.mappings != nil {
		r.mappings[gvk] = m
	}
	return m, err
}

func (r *Reconciler) resource(m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.cfg.Dynamic.Resource(m.Resource).Namespace(ns)
	}
	return r.cfg.Dynamic.Resource(m.Resource)
}

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

type objectKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

// apply writes the desired state: server-side apply of every object (forced:
// the CCM owns these fields, as upstream overwrote them each loop; strict:
// a field the schema does not know is an error, not silently pruned), then,
// only if all applied, deletion of owned objects no longer desired, then
// node annotations. An owned object whose body is what this process last
// applied, and whose resourceVersion is still the one that apply returned,
// is not applied again: at 10,000 Services a new Service then costs one
// write instead of 12,000. Anything else (a changed body, an object edited
// or deleted by someone else, a restart) is applied as before.
//
// apply consumes resp.Objects: each object is encoded only when its turn
// comes and dropped once encoded, so that at 10,000 Services the module's
// output is never held twice (as objects and as bodies) at once.
func (r *Reconciler) apply(ctx context.Context, d sdk.Description, resp sdk.GenerateResponse) error {
	targets, desired, mergeTargets, err := r.resolveTargets(d, resp.Objects)
	if err != nil {
		return err
	}
	owned := ownedKinds(targets, mergeTargets)
	if err := r.recordKinds(ctx, owned); err != nil {
		return r.applyErr("%v", err)
	}
	// The owned objects as they are now, to tell whether one is still as
	// this process last applied it.
	live, err := r.listLive(ctx, owned)
	if err != nil {
		return err
	}
	r.mu.Lock()
	last := r.applied
	r.mu.Unlock()
	next := make(map[objectKey]appliedObject, len(targets))
	force := true
	for i, t := range targets {
		body, err := r.encode(t, mergeTargets)
		// Both references to the object go, so it can be collected.
		targets[i].obj, resp.Objects[i] = nil, nil
		if err != nil {
			r.rememberApplied(last, next)
			return err
		}
		sum := sha256.Sum256(body)
		if prev, ok := last[t.key]; ok && prev.body == sum {
			if rv, ok := live[t.key]; ok && rv == prev.rv {
				next[t.key] = prev
				continue
			}
		}
		out, err := r.resource(t.m, t.key.namespace).Patch(ctx, t.key.name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldmanager.CCM, Force: &force, FieldValidation: "Strict"})
		if err != nil {
			r.rememberApplied(last, next)
			return r.applyErr("applying %s %s: %s", t.kind, qualified(t.key.namespace, t.key.name), wasmhost.OneLine(err.Error()))
		}
		if !mergeTargets[t.key] {
			next[t.key] = appliedObject{body: sum, rv: out.GetResourceVersion()}
		}
		objectsApplied.Inc()
	}
	r.rememberApplied(nil, next)
	if err := r.prune(ctx, d, desired, mergeTargets); err != nil {
		return err
	}
	return r.applyNodeAnnotations(ctx, resp.NodeAnnotations)
}

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

// listLive lists the owned objects of the kinds about to be applied, each
// in the namespace it is written to (never across namespaces): their
// resourceVersions.
func (r *Reconciler) listLive(ctx context.Context, kinds map[kindKey]bool) (map[objectKey]string, error) {
	out := map[objectKey]string{}
	for _, k := range sortedKeys(kinds) {
		gvk := k.gvk()
		m, err := r.mapping(gvk)
		if err != nil {
			return nil, r.applyErr("listing owned %s: %v", k.Kind, err)
		}
		items, err := r.listMeta(ctx, m, k.Namespace, sdk.OwnedLabel+"="+sdk.OwnedValue)
		if err != nil {
			return nil, r.applyErr("listing owned %s: %s", k.Kind, wasmhost.OneLine(err.Error()))
		}
		for _, o := range items {
			out[objectKey{gvk, o.Namespace, o.Name}] = o.ResourceVersion
		}
	}
	return out, nil
}

// liveObject is what the reconciler reads of a listed object. Keeping
// only this, and listing in pages, is what keeps a sync at 10,000
// Services from holding every object's metadata at once: the whole list
// with its managed fields was 50 MB of the CCM's heap.
type liveObject struct {
	Name, Namespace, ResourceVersion string
	UID                              types.UID
	// NodeAnnotations: the module's node-annotation field manager has
	// fields in it.
	NodeAnnotations bool
}

func newLiveObject(o metav1.Object) liveObject {
	l := liveObject{Name: o.GetName(), Namespace: o.GetNamespace(), ResourceVersion: o.GetResourceVersion(), UID: o.GetUID()}
	for _, mf := range o.GetManagedFields() {
		if mf.Manager == fieldmanager.ModuleNodeAnnotations {
			l.NodeAnnotations = true
		}
	}
	return l
}

// listPageSize is the page size for listing owned objects and nodes (a
// variable so that the integration test lists in pages of 2).
var listPageSize int64 = 500

// listMeta lists the objects of one kind in namespace ns ("" for a
// cluster-scoped kind) that match selector, a page at a time (through
// client-go's pager, which lists whole if a continue token expires).
func (r *Reconciler) listMeta(ctx context.Context, m *meta.RESTMapping, ns, selector string) ([]liveObject, error) {
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	page := func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		if r.cfg.Metadata == nil {
			return r.resource(m, ns).List(ctx, opts)
		}
		res := r.cfg.Metadata.Resource(m.Resource)
		if namespaced {
			return res.Namespace(ns).List(ctx, opts)
		}
		return res.List(ctx, opts)
	}
	return listLive(ctx, page, selector)
}

// listLive pages through a list and keeps what liveObject holds of each
// item: a page at a time is all that is ever decoded at once.
func listLive(ctx context.Context, page pager.ListPageFunc, selector string) ([]liveObject, error) {
	p := pager.New(page)
	p.PageSize, p.PageBufferSize = listPageSize, 1
	var out []liveObject
	err := p.EachListItem(ctx, metav1.ListOptions{LabelSelector: selector}, func(o runtime.Object) error {
		mo, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		out = append(out, newLiveObject(mo))
		return nil
	})
	return out, err
}

// nodesMapping is how listMeta lists Nodes.
var nodesMapping = &meta.RESTMapping{Resource: corev1.SchemeGroupVersion.WithResource("nodes"), Scope: meta.RESTScopeRoot}

// listNodes lists every Node (through Kube when there is no Metadata
// client).
func (r *Reconciler) listNodes(ctx context.Context) ([]liveObject, error) {
	if r.cfg.Metadata != nil {
		return r.listMeta(ctx, nodesMapping, "", "")
	}
	return listLive(ctx, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return r.cfg.Kube.CoreV1().Nodes().List(ctx, opts)
	}, "")
}

// applyNodeAnnotations applies each node's module annotations under
// fieldmanager.ModuleNodeAnnotations (not fieldmanager.CCM: see there);
// applying an empty set to a node that had some removes them (server-side
// apply drops fields a manager stops sending).
func (r *Reconciler) applyNodeAnnotations(ctx context.Context, want map[string]map[string]string) error {
	r.mu.Lock()
	annotated := r.annotated
	r.mu.Unlock()
	if annotated == nil {
		annotated = map[string]bool{}
		nodes, err := r.listNodes(ctx)
		if err != nil {
			return r.applyErr("listing nodes: %s", wasmhost.OneLine(err.Error()))
		}
		for _, n := range nodes {
			if n.NodeAnnotations {
				annotated[n.Name] = true
			}
		}
	}
	names := map[string]bool{}
	for n := range annotated {
		names[n] = true
	}
	for n, a := range want {
		if len(a) > 0 {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	if len(sorted) == 0 {
		return nil
	}
	// Server-side apply creates what does not exist: never apply to a node
	// that is gone, or it would come back as an empty Node.
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return r.applyErr("listing nodes: %s", wasmhost.OneLine(err.Error()))
	}
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n.Name] = true
	}
	force := true
	next := map[string]bool{}
	for _, n := range sorted {
		if !exists[n] {
			continue
		}
		md := map[string]any{"name": n}
		if a := want[n]; len(a) > 0 {
			md["annotations"] = a
		}
		body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": md})
		_, err := r.cfg.Kube.CoreV1().Nodes().Patch(ctx, n, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldmanager.ModuleNodeAnnotations, Force: &force})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return r.applyErr("applying annotations to node %s: %s", n, wasmhost.OneLine(err.Error()))
		}
		if len(want[n]) > 0 {
			next[n] = true
		}
	}
	r.mu.Lock()
	r.annotated = next
	r.mu.Unlock()
	return nil
}

func ptr[T any](v T) *T { return &v }

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
