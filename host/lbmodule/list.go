package lbmodule

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/pager"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// listJob is one kind to list, its mapping resolved.
type listJob struct {
	k kindKey
	m *meta.RESTMapping
}

// listJobs resolves the kinds' mappings, in the sync goroutine (r.mappings
// is its alone), before their lists go out at once.
func (r *Reconciler) listJobs(keys []kindKey) ([]listJob, error) {
	jobs := make([]listJob, len(keys))
	for i, k := range keys {
		m, err := r.mapping(k.gvk())
		if err != nil {
			return nil, r.applyErr("listing owned %s: %v", k.Kind, err)
		}
		jobs[i] = listJob{k, m}
	}
	return jobs, nil
}

// listed is what a sync listed of the kinds it applies or prunes.
type listed struct {
	mu sync.Mutex // guards all three while the lists run
	// live: the owned objects' versions; unowned: the others that exist.
	live    map[objectKey]version
	unowned map[objectKey]bool
	// kinds are the kinds listed: live and unowned are whole for them.
	kinds map[kindKey]bool
}

func newListed() *listed {
	return &listed{live: map[objectKey]version{}, unowned: map[objectKey]bool{}, kinds: map[kindKey]bool{}}
}

// run lists the jobs' kinds listWorkers at a time into l, and returns the
// error of each kind it could not list (that kind is not in l.kinds).
// Each kind is listed in the namespace it is written to (never across
// namespaces), for the owned objects' versions (live) and which others
// exist (unowned: upstream's, or the user's). One list serves both,
// without a label selector: at scale nearly every object of these kinds
// is the CCM's anyway. Five lists one after the other took almost half a
// second under a burst's load.
func (l *listed) run(ctx context.Context, r *Reconciler, jobs []listJob) []error {
	var failed []error
	// No error ends the group: a kind that fails leaves the others listed.
	var g errgroup.Group
	g.SetLimit(listWorkers)
	for _, j := range jobs {
		g.Go(func() error {
			items, err := r.listMeta(ctx, j.m, j.k.Namespace, "")
			if err != nil {
				l.mu.Lock()
				defer l.mu.Unlock()
				failed = append(failed, r.applyErr("listing owned %s: %s", j.k.Kind, wasmhost.OneLine(err.Error())))
				return nil
			}
			l.add(j.k, items)
			return nil
		})
	}
	_ = g.Wait()
	return failed
}

// add records the objects of kind k, whole (listed or from the watch).
func (l *listed) add(k kindKey, items []liveObject) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gvk := k.gvk()
	for _, o := range items {
		key := objectKey{gvk, o.Namespace, o.Name}
		if !o.Owned {
			l.unowned[key] = true
			continue
		}
		l.live[key] = version{o.ResourceVersion, o.UID, o.Generation}
	}
	l.kinds[k] = true
}

// liveObject is what the reconciler reads of a listed object. Keeping
// only this, and listing in pages, is what keeps a sync at 10,000
// Services from holding every object's metadata at once: the whole list
// with its managed fields was 50 MB of the CCM's heap.
type liveObject struct {
	Name, Namespace, ResourceVersion string
	UID                              types.UID
	Generation                       int64
	// NodeAnnotations: the module's node-annotation field manager has
	// fields in it.
	NodeAnnotations bool
	// Owned: labelled sdk.OwnedLabel=sdk.OwnedValue.
	Owned bool
}

func newLiveObject(o metav1.Object) liveObject {
	l := liveObject{Name: o.GetName(), Namespace: o.GetNamespace(), ResourceVersion: o.GetResourceVersion(), UID: o.GetUID(), Generation: o.GetGeneration(),
		Owned: o.GetLabels()[sdk.OwnedLabel] == sdk.OwnedValue}
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
