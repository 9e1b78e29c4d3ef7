package lbmodule

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// The kinds record: every kind (and namespace) the CCM has applied objects
// of for any module, kept in a ConfigMap so that a restart with another
// module (a changed loadbalancer URL) still knows where the previous
// module's objects are and prunes them. It is written before the objects
// (a crash between the two leaves a kind recorded with nothing to prune,
// never an object nobody knows of) and shrinks once a kind no longer
// declared has no owned object left.
const (
	RecordNamespace = "kube-system"
	RecordName      = "cloud-provider-equinix-metal-lbmodule-kinds"
	recordKey       = "kinds"
)

// kindKey is one recorded kind.
type kindKey struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
}

func (k kindKey) gvk() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(k.APIVersion, k.Kind)
}

func keysOf(d sdk.Description) map[kindKey]bool {
	out := map[kindKey]bool{}
	for _, k := range d.Emits {
		out[kindKey{k.APIVersion, k.Kind, k.Namespace}] = true
	}
	return out
}

// loadRecord reads the record once per process; later syncs use the copy
// this reconciler keeps current.
func (r *Reconciler) loadRecord(ctx context.Context) (map[kindKey]bool, error) {
	r.mu.Lock()
	rec := r.record
	r.mu.Unlock()
	if rec != nil {
		return rec, nil
	}
	rec = map[kindKey]bool{}
	cm, err := r.cfg.Kube.CoreV1().ConfigMaps(RecordNamespace).Get(ctx, RecordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return rec, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the record of the kinds it wrote, ConfigMap %s/%s: %s", RecordNamespace, RecordName, wasmhost.OneLine(err.Error()))
	}
	var kinds []kindKey
	if raw := cm.Data[recordKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &kinds); err != nil {
			return nil, fmt.Errorf("the record of the kinds it wrote, ConfigMap %s/%s, is not valid (%v); delete it and remove leftover objects labelled %s=%s by hand", RecordNamespace, RecordName, err, sdk.OwnedLabel, sdk.OwnedValue)
		}
	}
	for _, k := range kinds {
		rec[k] = true
	}
	return rec, nil
}

// saveRecord writes rec if it differs from what is stored.
func (r *Reconciler) saveRecord(ctx context.Context, old, rec map[kindKey]bool) error {
	if equalKeys(old, rec) {
		r.setRecord(rec)
		return nil
	}
	kinds := make([]kindKey, 0, len(rec))
	for k := range rec {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		a, b := kinds[i], kinds[j]
		if a.APIVersion != b.APIVersion {
			return a.APIVersion < b.APIVersion
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Namespace < b.Namespace
	})
	data, _ := json.Marshal(kinds)
	cm := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: RecordName, Namespace: RecordNamespace},
		Data:       map[string]string{recordKey: string(data)},
	}
	body, _ := json.Marshal(cm)
	force := true
	if _, err := r.cfg.Kube.CoreV1().ConfigMaps(RecordNamespace).Patch(ctx, RecordName, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldmanager.CCM, Force: &force}); err != nil {
		return fmt.Errorf("writing the record of the kinds it writes, ConfigMap %s/%s: %s", RecordNamespace, RecordName, wasmhost.OneLine(err.Error()))
	}
	r.setRecord(rec)
	return nil
}

func (r *Reconciler) setRecord(rec map[kindKey]bool) {
	r.mu.Lock()
	r.record = rec
	r.mu.Unlock()
}

func equalKeys(a, b map[kindKey]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// recordKinds adds the kinds of the owned objects about to be applied to
// the record, before they are written.
func (r *Reconciler) recordKinds(ctx context.Context, kinds map[kindKey]bool) error {
	old, err := r.loadRecord(ctx)
	if err != nil {
		return err
	}
	next := map[kindKey]bool{}
	for k := range old {
		next[k] = true
	}
	for k := range kinds {
		next[k] = true
	}
	return r.saveRecord(ctx, old, next)
}

// mergeKinds are the declared kinds the module also reads by name in the
// same namespace: it merges into the user's object (the legacy MetalLB
// ConfigMap) rather than owning objects of that kind, so unless the record
// says otherwise there is nothing of it to prune, and the CCM needs no
// right to list the kind (least privilege: one ConfigMap by name).
func mergeKinds(d sdk.Description) map[kindKey]bool {
	out := map[kindKey]bool{}
	for _, rd := range d.Reads {
		if rd.Name != "" {
			out[kindKey{rd.APIVersion, rd.Kind, rd.Namespace}] = true
		}
	}
	return out
}

// prune deletes every owned object of a recorded kind that the module no
// longer wants: of the kinds it declares (but merges into), and of the
// kinds a previous module wrote. A namespaced kind is only ever listed in its recorded
// namespace; a namespaced kind recorded without one is an error, never a
// list across the cluster. A kind no longer declared leaves the record
// once nothing owned is left of it.
//
// live is what the sync listed of the kinds in listed, before its writes
// (readAndList): those kinds are not listed again. An object made since by
// the CCM is desired; one made by someone else waits for the next sync;
// one deleted since is a NotFound, which prune tolerates. written are the
// kinds apply wrote.
func (r *Reconciler) prune(ctx context.Context, d sdk.Description, desired, keep map[objectKey]bool, live map[objectKey]version, listed, written map[kindKey]bool) error {
	old, err := r.loadRecord(ctx)
	if err != nil {
		return r.applyErr("%v", err)
	}
	next := map[kindKey]bool{}
	for k := range old {
		next[k] = true
	}
	// The kinds are pruned listWorkers at a time (their lists and deletes
	// are round trips); their mappings are resolved first, here, as
	// r.mappings is the sync goroutine's alone.
	type job struct {
		k     kindKey
		m     *meta.RESTMapping
		known []liveObject
	}
	var jobs []job
	for _, k := range pruneKinds(old, d) {
		m, err := r.mapping(k.gvk())
		if meta.IsNoMatchError(err) {
			delete(next, k) // the CRD is gone, and its objects with it
			continue
		} else if err != nil {
			return r.applyErr("pruning %s: %v", k.Kind, err)
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace && k.Namespace == "" {
			return r.applyErr("declares the namespaced kind %s %s without a namespace, so its objects cannot be pruned; declare the namespace in describe (for a module, the loadbalancer URL option ?namespace=<namespace>)", k.APIVersion, k.Kind)
		}
		var known []liveObject
		if listed[k] {
			known = liveOfKind(live, k)
		}
		jobs = append(jobs, job{k, m, known})
	}
	left := make([]int, len(jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listWorkers)
	for i, j := range jobs {
		g.Go(func() error {
			var err error
			left[i], err = r.pruneKind(gctx, j.m, j.k, desired, keep, j.known)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, j := range jobs {
		// A kind apply wrote has objects (listed before they were
		// written, they may not count in left): it stays recorded.
		if left[i] == 0 && !written[j.k] {
			delete(next, j.k) // recorded again before its next write
		}
	}
	if err := r.saveRecord(ctx, old, next); err != nil {
		return r.applyErr("%v", err)
	}
	return nil
}

// pruneKinds are the kinds a prune visits: the recorded ones, and the
// declared ones the module does not merge into.
func pruneKinds(record map[kindKey]bool, d sdk.Description) []kindKey {
	merged := mergeKinds(d)
	visit := map[kindKey]bool{}
	for k := range record {
		visit[k] = true
	}
	for k := range keysOf(d) {
		if !merged[k] {
			visit[k] = true
		}
	}
	return sortedKeys(visit)
}

// liveOfKind are the objects of kind k in apply's listing.
func liveOfKind(live map[objectKey]version, k kindKey) []liveObject {
	gvk := k.gvk()
	out := []liveObject{} // listed, even if empty
	for key, v := range live {
		if key.gvk == gvk && key.namespace == k.Namespace {
			out = append(out, liveObject{Name: key.name, Namespace: key.namespace, ResourceVersion: v.rv, UID: v.uid, Generation: v.generation})
		}
	}
	return out
}

// pruneKind deletes the owned objects of one kind that are not wanted and
// returns how many owned objects of it remain. known, when not nil, is
// the kind's owned objects as already listed in this sync.
func (r *Reconciler) pruneKind(ctx context.Context, m *meta.RESTMapping, k kindKey, desired, keep map[objectKey]bool, known []liveObject) (int, error) {
	gvk := k.gvk()
	items := known
	if items == nil {
		var err error
		if items, err = r.listMeta(ctx, m, k.Namespace, sdk.OwnedLabel+"="+sdk.OwnedValue); err != nil {
			return 0, r.applyErr("listing owned %s to prune: %s", k.Kind, wasmhost.OneLine(err.Error()))
		}
	}
	// Deletes go out applyWorkers at a time: a burst of deleted Services
	// is as many pools to delete.
	left := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(applyWorkers)
	for _, o := range items {
		key := objectKey{gvk, o.Namespace, o.Name}
		if desired[key] || keep[key] {
			left++
			continue
		}
		g.Go(func() error {
			err := r.resource(m, o.Namespace).Delete(gctx, o.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(o.UID)}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return r.applyErr("pruning %s %s: %s", k.Kind, qualified(key.namespace, key.name), wasmhost.OneLine(err.Error()))
			}
			objectsPruned.Inc()
			r.log.V(2).Info("Pruned an object the module no longer wants", "kind", k.Kind, "object", qualified(key.namespace, key.name))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return left, nil
}

func sortedKeys(m map[kindKey]bool) []kindKey {
	out := make([]kindKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].APIVersion+"/"+out[i].Kind+"/"+out[i].Namespace < out[j].APIVersion+"/"+out[j].Kind+"/"+out[j].Namespace
	})
	return out
}

func ptr[T any](v T) *T { return &v }
