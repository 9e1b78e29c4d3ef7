package lbmodule

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// Change is one write a sync of the module's output would make.
type Change struct {
	// Action is create, update or prune (objects), annotate (a node's
	// module annotations).
	Action    string        `json:"action"`
	Kind      string        `json:"kind"`
	Namespace string        `json:"namespace,omitempty"`
	Name      string        `json:"name"`
	Fields    []fieldChange `json:"fields,omitempty"`
}

// fieldChange is one field an apply would set (To) where the live object
// has From; a nil To on a node annotation means it is removed.
type fieldChange struct {
	Path string `json:"path"`
	From any    `json:"from,omitempty"`
	To   any    `json:"to,omitempty"`
}

// Plan runs the first half of a sync — snapshot, read, generate, validate,
// encode — exactly as Sync does, and instead of applying, compares what it
// would apply, prune and annotate with what the cluster holds. It only
// reads (GET and LIST); nothing of the reconciler's memory of past applies
// is used, so every difference is reported.
func (r *Reconciler) Plan(ctx context.Context) ([]Change, []string, error) {
	req, err := r.cfg.Snapshot(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the module's input: %w", err)
	}
	desc := r.cfg.Module.Describe()
	if req.Existing, err = r.read(ctx, desc); err != nil {
		return nil, nil, r.applyErr("reading the objects it asked for: %v", err)
	}
	resp, err := r.cfg.Module.Generate(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	targets, desired, mergeTargets, err := r.resolveTargets(desc, resp.Objects)
	if err != nil {
		return nil, nil, err
	}
	record, err := r.loadRecord(ctx)
	if err != nil {
		return nil, nil, r.applyErr("%v", err)
	}
	var changes []Change
	if c, ok := recordChange(record, ownedKinds(targets, mergeTargets)); ok {
		changes = append(changes, c)
	}
	for _, t := range targets {
		body, err := r.encode(t, mergeTargets)
		if err != nil {
			return nil, nil, err
		}
		c, err := r.planWrite(ctx, t, body)
		if err != nil {
			return nil, nil, err
		}
		if c != nil {
			changes = append(changes, *c)
		}
	}
	pruned, err := r.planPrune(ctx, record, desc, desired, mergeTargets)
	if err != nil {
		return nil, nil, err
	}
	changes = append(changes, pruned...)
	annotations, err := r.planNodeAnnotations(ctx, resp.NodeAnnotations)
	if err != nil {
		return nil, nil, err
	}
	return append(changes, annotations...), resp.Warnings, nil
}

// recordChange is the write of the kinds record that the apply would make
// before the objects, if it adds a kind.
func recordChange(record, owned map[kindKey]bool) (Change, bool) {
	var added []string
	for _, k := range sortedKeys(owned) {
		if !record[k] {
			added = append(added, strings.TrimPrefix(k.APIVersion+" "+k.Kind+" "+k.Namespace, " "))
		}
	}
	if len(added) == 0 {
		return Change{}, false
	}
	return Change{Action: "update", Kind: "ConfigMap", Namespace: RecordNamespace, Name: RecordName,
		Fields: []fieldChange{{Path: "data.kinds", To: "adds " + strings.Join(added, ", ")}}}, true
}

// planWrite compares one object to apply with the live one.
func (r *Reconciler) planWrite(ctx context.Context, w target, body []byte) (*Change, error) {
	c := &Change{Kind: w.kind, Namespace: w.key.namespace, Name: w.key.name}
	live, err := r.resource(w.m, w.key.namespace).Get(ctx, w.key.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.Action = "create"
		return c, nil
	}
	if err != nil {
		return nil, r.applyErr("reading %s %s: %s", w.kind, qualified(w.key.namespace, w.key.name), wasmhost.OneLine(err.Error()))
	}
	var want, have any
	if err := json.Unmarshal(body, &want); err != nil {
		return nil, err
	}
	b, err := json.Marshal(live.Object)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &have); err != nil {
		return nil, err
	}
	c.Fields = diffFields("", want, have)
	if len(c.Fields) == 0 {
		return nil, nil
	}
	c.Action = "update"
	return c, nil
}

// diffFields lists the fields of want (a decoded JSON document) whose value
// in have differs: what a server-side apply of want would set. Maps are
// compared key by key; anything else (lists included) as a whole.
func diffFields(path string, want, have any) []fieldChange {
	wm, ok := want.(map[string]any)
	if !ok {
		if reflect.DeepEqual(want, have) {
			return nil
		}
		return []fieldChange{{Path: path, From: have, To: want}}
	}
	hm, _ := have.(map[string]any)
	keys := make([]string, 0, len(wm))
	for k := range wm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []fieldChange
	for _, k := range keys {
		p := k
		if path != "" {
			p = path + "." + k
		}
		out = append(out, diffFields(p, wm[k], hm[k])...)
	}
	return out
}

// planPrune lists the owned objects a prune would delete, visiting the
// kinds prune visits.
func (r *Reconciler) planPrune(ctx context.Context, record map[kindKey]bool, d sdk.Description, desired, keep map[objectKey]bool) ([]Change, error) {
	var out []Change
	for _, k := range pruneKinds(record, d) {
		m, err := r.mapping(k.gvk())
		if meta.IsNoMatchError(err) {
			continue
		} else if err != nil {
			return nil, r.applyErr("pruning %s: %v", k.Kind, err)
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace && k.Namespace == "" {
			return nil, r.applyErr("declares the namespaced kind %s %s without a namespace, so its objects cannot be pruned; declare the namespace in describe", k.APIVersion, k.Kind)
		}
		list, err := r.resource(m, k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sdk.OwnedLabel + "=" + sdk.OwnedValue})
		if err != nil {
			return nil, r.applyErr("listing owned %s: %s", k.Kind, wasmhost.OneLine(err.Error()))
		}
		for _, u := range list.Items {
			key := objectKey{k.gvk(), u.GetNamespace(), u.GetName()}
			if !desired[key] && !keep[key] {
				out = append(out, Change{Action: "prune", Kind: k.Kind, Namespace: u.GetNamespace(), Name: u.GetName()})
			}
		}
	}
	return out, nil
}

// planNodeAnnotations compares the module's node annotations with those
// nodes carry under fieldmanager.ModuleNodeAnnotations.
func (r *Reconciler) planNodeAnnotations(ctx context.Context, want map[string]map[string]string) ([]Change, error) {
	nodes, err := r.cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, r.applyErr("listing nodes: %s", wasmhost.OneLine(err.Error()))
	}
	var out []Change
	for i := range nodes.Items {
		n := &nodes.Items[i]
		owned := moduleAnnotationKeys(n)
		var fields []fieldChange
		for _, k := range sortedStrings(want[n.Name]) {
			if v, ok := n.Annotations[k]; !ok || v != want[n.Name][k] {
				fields = append(fields, fieldChange{Path: "metadata.annotations." + k, From: n.Annotations[k], To: want[n.Name][k]})
			}
		}
		for _, k := range owned {
			if _, keep := want[n.Name][k]; !keep {
				fields = append(fields, fieldChange{Path: "metadata.annotations." + k, From: n.Annotations[k]})
			}
		}
		if len(fields) > 0 {
			out = append(out, Change{Action: "annotate", Kind: "Node", Name: n.Name, Fields: fields})
		}
	}
	return out, nil
}

// moduleAnnotationKeys are the annotations the node has under the module's
// field manager, from its managedFields.
func moduleAnnotationKeys(n *corev1.Node) []string {
	var keys []string
	for _, mf := range n.ManagedFields {
		if mf.Manager != fieldmanager.ModuleNodeAnnotations || mf.FieldsV1 == nil {
			continue
		}
		var f struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &f) != nil {
			continue
		}
		for k := range f.Metadata.Annotations {
			if name, ok := strings.CutPrefix(k, "f:"); ok && !slices.Contains(keys, name) {
				keys = append(keys, name)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func sortedStrings(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
