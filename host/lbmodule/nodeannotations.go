package lbmodule

import (
	"context"
	"encoding/json"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

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
		// Known to be none: the next sync need not list the nodes again
		// (every sync of a module without annotations did, a list of
		// every Node).
		r.mu.Lock()
		r.annotated = map[string]bool{}
		r.mu.Unlock()
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
