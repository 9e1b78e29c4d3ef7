package lbmodule

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// ownershipResetReason is the reason of the Normal Event recorded on an
// object whose field ownership at other versions was dropped.
const ownershipResetReason = "FieldOwnershipReset"

// applyObject applies one object, and recovers once from what another
// writer's field ownership can do to a server-side apply.
//
// The apiserver keeps each writer's managed fields at the version it wrote
// in. Applying at another version, it converts the object to each of those
// versions to merge ownership, and when the conversion fails the apply
// fails, every time. Upstream v3.8.1 writes BGPPeers as metallb.io/v1beta1;
// this CCM applies v1beta2, and MetalLB's CRDs as installed without its
// conversion webhook (strategy None) keep v1beta2's defaulted fields
// (disableMP, dualStackAddressFamily since v0.14 and v0.15) in a "v1beta1"
// object whose schema lacks them: ".spec.disableMP: field not declared in
// schema"; on any release, the passwordSecret the module writes is not in
// v1beta1. With the webhook installed but down, the conversion fails too.
//
// So when an apply fails and the object has managed fields at a version
// other than the one applied, those entries are dropped (nothing else of
// the object changes: the CCM forces every field it writes anyway) and the
// apply is tried once more. The drop is logged and recorded as an Event on
// the object, naming the managers and versions. An apply that fails for
// any other reason returns its error as before.
func (r *Reconciler) applyObject(ctx context.Context, t target, body []byte) (*unstructured.Unstructured, error) {
	res := r.resource(t.m, t.key.namespace)
	force := true
	opts := metav1.PatchOptions{FieldManager: fieldmanager.CCM, Force: &force, FieldValidation: "Strict"}
	out, err := res.Patch(ctx, t.key.name, types.ApplyPatchType, body, opts)
	if err == nil {
		return out, nil
	}
	dropped, derr := r.dropOtherVersionOwners(ctx, res, t, err)
	if derr != nil {
		r.log.Error(derr, "Could not drop field ownership at other versions after a failed apply", "kind", t.kind, "object", qualified(t.key.namespace, t.key.name))
	}
	if !dropped {
		return nil, err
	}
	return res.Patch(ctx, t.key.name, types.ApplyPatchType, body, opts)
}

// dropOtherVersionOwners removes the managed-field entries of the live
// object that are at another version than t's, and reports whether it
// removed any. applyErr is the failure that led here, for the log and the
// Event.
func (r *Reconciler) dropOtherVersionOwners(ctx context.Context, res dynamic.ResourceInterface, t target, applyErr error) (bool, error) {
	live, err := res.Get(ctx, t.key.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) { // a create that failed: no one's ownership to blame
		return false, nil
	}
	if err != nil {
		return false, err
	}
	version := t.key.gvk.GroupVersion().String()
	keep, drop := splitByVersion(live.GetManagedFields(), version)
	if len(drop) == 0 {
		return false, nil
	}
	patch, err := managedFieldsPatch(live.GetResourceVersion(), keep)
	if err != nil {
		return false, err
	}
	if _, err := res.Patch(ctx, t.key.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldmanager.CCM}); err != nil {
		return false, err
	}
	msg := fmt.Sprintf("Dropped the field ownership recorded at another version (%s), because applying it at %s failed: %v. "+
		"Nothing else changed; the CCM owns and writes this object's fields at %s", strings.Join(drop, ", "), version, wasmhost.OneLine(applyErr.Error()), version)
	r.log.Info("Dropped field ownership at other versions so that the apply can succeed", "kind", t.kind, "object", qualified(t.key.namespace, t.key.name), "dropped", drop, "applyError", wasmhost.OneLine(applyErr.Error()))
	if r.cfg.Recorder != nil {
		r.cfg.Recorder.Eventf(live, corev1.EventTypeNormal, ownershipResetReason, "%s", msg)
	}
	return true, nil
}

// splitByVersion keeps the entries at version and names the others as
// "manager (operation, apiVersion)", sorted.
func splitByVersion(entries []metav1.ManagedFieldsEntry, version string) (keep []metav1.ManagedFieldsEntry, drop []string) {
	for _, e := range entries {
		if e.APIVersion == version {
			keep = append(keep, e)
			continue
		}
		drop = append(drop, fmt.Sprintf("%s (%s, %s)", e.Manager, e.Operation, e.APIVersion))
	}
	slices.Sort(drop)
	return keep, drop
}

// managedFieldsPatch is a JSON merge patch that replaces the object's
// managed fields with keep, at resourceVersion rv (a concurrent write
// makes it fail instead of losing that write's ownership). An empty list
// would be ignored by the apiserver (so that clients unaware of the field
// never strip it); one empty entry is its documented way to clear them.
func managedFieldsPatch(rv string, keep []metav1.ManagedFieldsEntry) ([]byte, error) {
	var fields any = keep
	if len(keep) == 0 {
		fields = []map[string]any{{}}
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": rv, "managedFields": fields}})
}

// applyHint names the fix for a refusal whose cause the apiserver's words
// do not tell: MetalLB before v0.16 declares its ASNs as int32 with a
// maximum of 2^32-1, and Kubernetes 1.36 and later refuse every write of
// such an object ("Maximum boundary value must be of type integer with
// format int32"), whatever its values.
func applyHint(err error) string {
	if strings.Contains(err.Error(), "boundary value must be of type integer with format int32") {
		return " (the CRD declares an int32 field with a bound beyond int32, which this Kubernetes refuses in every write; " +
			"for MetalLB's BGPPeer, install the CRDs of MetalLB v0.16 or later)"
	}
	return ""
}
