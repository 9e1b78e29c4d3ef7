// Package watchcache keeps a watched copy of lists a caller makes over and
// over, so that after the first a list is a read of memory instead of a
// round trip to kube-apiserver.
//
// The load-balancer module's sync (host/lbmodule) is the caller: each sync
// reads what the module declared (a few label-selected objects) and lists
// the metadata of every kind it writes. Under a burst of new Services those
// round trips took 0.2-1.7 s a sync on a loaded kube-apiserver, and every
// Service staged meanwhile waited for them before its pool could be
// written.
//
// A selection is served only while its watch is whole: from the moment its
// informer has synced until its list or watch fails. The first ask starts
// the watch and answers "not served", and so does every ask after a
// failure (the watch is dropped and started again by the next ask), so the
// caller lists as before: never a copy it cannot trust more than a list.
// A selection whose watch kube-apiserver refuses (RBAC that grants list and
// not watch, as the chart does for Secrets) is never watched again.
//
// A served copy may lag a write the caller has just made by the watch's
// latency (milliseconds; longer on a loaded server): the caller must
// tolerate a list a moment old, as it tolerates a change made between its
// list and its write.
//
// The watches also tell the caller when something it owns is deleted
// (New's onDelete): the objects it wrote are watched anyway. The module
// sync runs on changes, not on a timer, and a deleted object that changes
// nothing else it reads (MetalLB's BGPAdvertisements) otherwise stayed
// deleted until something else changed.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package watchcache

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Selection is one list: a resource, in one namespace ("" for a
// cluster-scoped resource; never across namespaces), with an optional
// label selector.
type Selection struct {
	Resource      schema.GroupVersionResource
	Namespace     string
	LabelSelector string
}

// Cache holds the watches. Its methods are safe for concurrent use.
type Cache struct {
	ctx context.Context
	dyn dynamic.Interface
	md  metadata.Interface
	log klog.Logger
	// onDelete is called when an owned object is deleted (New).
	onDelete func()
	// keep are the labels the metadata copies keep (slim), and labels the
	// kept label sets, one map for each distinct set, shared by the copies.
	keep   []string
	labels sync.Map // string (the set, encoded) → map[string]string

	mu      sync.Mutex
	watches map[key]*watch
	// refused are the resources kube-apiserver would not let this client
	// list or watch: asked for again, they are not watched (a restart
	// reads the RBAC again).
	refused map[schema.GroupVersionResource]bool
}

// key is a selection, as whole objects or as metadata only.
type key struct {
	Selection
	full bool
}

type watch struct {
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
	// used: asked for since the last Sweep.
	used bool
	// failed: its list or watch failed since it started.
	failed atomic.Bool
}

// New returns a Cache whose watches run until ctx ends. Either client may
// be nil: its kind of selection is then never served. keepLabels are the
// labels the caller reads of a metadata copy; the copies keep no other.
// onDelete, when not nil, is called (on a watch's goroutine: it must not
// block) each time a watch sees an owned object deleted: one that carries
// a kept label, or any object of a selection with a label selector (the
// caller selects what it declared).
func New(ctx context.Context, dyn dynamic.Interface, md metadata.Interface, log klog.Logger, onDelete func(), keepLabels ...string) *Cache {
	return &Cache{ctx: ctx, dyn: dyn, md: md, log: log, onDelete: onDelete, keep: keepLabels, watches: map[key]*watch{}, refused: map[schema.GroupVersionResource]bool{}}
}

// Objects returns the objects of sel, deep copies without managedFields,
// and true, when its watch is whole; otherwise false (the caller lists).
func (c *Cache) Objects(sel Selection) ([]*unstructured.Unstructured, bool) {
	items, ok := c.list(key{sel, true})
	if !ok {
		return nil, false
	}
	out := typed[*unstructured.Unstructured](items)
	for i, u := range out {
		out[i] = u.DeepCopy()
	}
	sortByName(out, func(u *unstructured.Unstructured) string { return u.GetName() })
	return out, true
}

// Metadata returns the metadata of the objects of sel and true, when its
// watch is whole; otherwise false (the caller lists). It keeps only the
// name, namespace, UID, resourceVersion, generation and the labels New was
// told to keep of each object (slim), and the objects are the cache's
// own, their label maps shared with others: read them, never change them.
func (c *Cache) Metadata(sel Selection) ([]*metav1.PartialObjectMetadata, bool) {
	items, ok := c.list(key{sel, false})
	if !ok {
		return nil, false
	}
	out := typed[*metav1.PartialObjectMetadata](items)
	sortByName(out, func(m *metav1.PartialObjectMetadata) string { return m.Name })
	return out, true
}

// Sweep stops the watches no one asked for since the last Sweep: a
// module replaced, a kind no longer written.
func (c *Cache) Sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, w := range c.watches {
		if !w.used {
			w.stop()
			delete(c.watches, k)
			continue
		}
		w.used = false
	}
}

// Watching reports how many selections are watched.
func (c *Cache) Watching() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.watches)
}

// list serves k from its watch, or starts the watch and answers false.
func (c *Cache) list(k key) ([]any, bool) {
	if c.ctx.Err() != nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused[k.Resource] {
		return nil, false
	}
	w := c.watches[k]
	if w != nil && w.failed.Load() {
		// Dropped: what it holds may miss changes made since it failed.
		w.stop()
		delete(c.watches, k)
		w = nil
	}
	if w == nil {
		if w = c.start(k); w == nil {
			return nil, false
		}
		c.watches[k] = w
		w.used = true
		return nil, false
	}
	w.used = true
	if !w.inf.HasSynced() {
		return nil, false
	}
	items := w.inf.GetStore().List()
	if w.failed.Load() {
		return nil, false // failed while the store was read
	}
	return items, true
}

// start starts k's informer; nil if the client for its kind is missing.
func (c *Cache) start(k key) *watch {
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = k.LabelSelector }
	var inf cache.SharedIndexInformer
	switch {
	case k.full && c.dyn != nil:
		inf = dynamicinformer.NewFilteredDynamicInformer(c.dyn, k.Resource, k.Namespace, 0, cache.Indexers{}, tweak).Informer()
		_ = inf.SetTransform(dropManagedFields)
	case !k.full && c.md != nil:
		inf = metadatainformer.NewFilteredMetadataInformer(c.md, k.Resource, k.Namespace, 0, cache.Indexers{}, tweak).Informer()
		_ = inf.SetTransform(func(obj any) (any, error) { return c.slim(obj, k.Namespace), nil })
	default:
		return nil
	}
	if c.onDelete != nil {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if k.LabelSelector != "" || c.owned(obj) {
				c.onDelete()
			}
		}})
	}
	ctx, stop := context.WithCancel(c.ctx)
	w := &watch{inf: inf, stop: stop}
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.failed.Store(true)
		if apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err) {
			c.refuse(k, err)
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	go inf.RunWithContext(ctx)
	return w
}

// refuse records that k's resource may not be watched, and stops the watch.
func (c *Cache) refuse(k key, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.refused[k.Resource] {
		c.log.Info("Not watching a resource the load-balancer module's sync lists: kube-apiserver refused; each sync lists it instead", "resource", k.Resource.String(), "namespace", k.Namespace, "err", err.Error())
	}
	c.refused[k.Resource] = true
	if w := c.watches[k]; w != nil {
		w.stop()
		delete(c.watches, k)
	}
}

// slim is the transform of the metadata watches: what the caller reads of
// an object (name, namespace, UID, resourceVersion, generation and the
// labels it named), without its managed fields, annotations and other
// labels, most of its metadata's size. At 10,000 Services the pools'
// whole metadata is tens of MB; their labels alone, one of them unique to
// each pool's Service, were a few MB more than the sync reads (the one
// label that says the CCM owns the object), which a 256Mi container at
// that size did not have to spare. ns, the selection's namespace, is
// every object's: one string for all of them.
func (c *Cache) slim(obj any, ns string) any {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj // a tombstone: its object was slimmed when it came
	}
	if m.Namespace != ns {
		ns = m.Namespace
	}
	return &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: ns, UID: m.UID, ResourceVersion: m.ResourceVersion,
			Generation: m.Generation, Labels: c.keptLabels(m.Labels), DeletionTimestamp: m.DeletionTimestamp,
		},
	}
}

// keptLabels is the subset of labels New was told to keep, as a map shared
// by every copy with the same subset (nil when none is set): the kept
// labels say what kind of object it is, and take few values.
func (c *Cache) keptLabels(labels map[string]string) map[string]string {
	var enc strings.Builder
	for _, k := range c.keep {
		if v, ok := labels[k]; ok {
			enc.WriteString(k + "=" + v + "\x00")
		}
	}
	if enc.Len() == 0 {
		return nil
	}
	if m, ok := c.labels.Load(enc.String()); ok {
		return m.(map[string]string)
	}
	m := make(map[string]string, len(c.keep))
	for _, k := range c.keep {
		if v, ok := labels[k]; ok {
			m[k] = v
		}
	}
	got, _ := c.labels.LoadOrStore(enc.String(), m)
	return got.(map[string]string)
}

// owned reports whether a deleted object (or its tombstone) carries one of
// the kept labels.
func (c *Cache) owned(obj any) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	for _, k := range c.keep {
		if _, ok := m.GetLabels()[k]; ok {
			return true
		}
	}
	return false
}

func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}

// typed keeps the items of a store that are Ts (a store holds only its
// informer's type; anything else is skipped, never a panic).
func typed[T any](items []any) []T {
	out := make([]T, 0, len(items))
	for _, o := range items {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func sortByName[T any](s []T, name func(T) string) {
	sort.Slice(s, func(i, j int) bool { return name(s[i]) < name(s[j]) })
}
