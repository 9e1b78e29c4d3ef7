package lbmodule_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// TestApplyOverPeersUpstreamWrote: upstream v3.8.1 writes its BGPPeers as
// metallb.io/v1beta1 (with Update, as cloud-provider-equinix-metal); this
// CCM applies them as v1beta2. On MetalLB's CRDs as installed without the
// conversion webhook, the apiserver cannot convert a v1beta2 object with
// fields v1beta1's schema lacks (the module's passwordSecret; disableMP
// and dualStackAddressFamily, which v1beta2 defaults from v0.14 and v0.15)
// to v1beta1 for upstream's managed fields, and every apply failed. For each MetalLB release the CCM may
// meet, the sync must succeed, the peer end as the module wants it, no
// ownership stay at v1beta1, and one Event say what was dropped.
//
// Kubernetes >= 1.36 refuses every BGPPeer under MetalLB <= 0.15's CRDs
// (see crdsAsOlderKubernetesTook): those releases run with the CRDs as an
// older apiserver took them, and once as published, where the sync must
// fail naming the fix.
func TestApplyOverPeersUpstreamWrote(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test against real kube-apiservers; run without -short")
	}
	for _, tc := range []struct {
		name, metallb string
		asPublished   bool
		wantErr       string
	}{
		// The module writes spec.passwordSecret, which v1beta1 lacks in
		// every release; v1beta2 defaults disableMP from v0.14 and
		// dualStackAddressFamily from v0.15, which upstream's fixture
		// shows and the audit met.
		{name: "v0.13.12", metallb: "v0.13.12"},
		{name: "v0.14.9", metallb: "v0.14.9"},
		{name: "v0.15.3", metallb: "v0.15.3"},
		{name: "v0.16.2", metallb: "v0.16.2", asPublished: true},
		{name: "v0.15.3 as published", metallb: "v0.15.3", asPublished: true, wantErr: "install the CRDs of MetalLB v0.16 or later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir, err := testenv.MetalLBCRDDirAt(ctx, tc.metallb)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.asPublished {
				dir = crdsAsOlderKubernetesTook(t, dir)
			}
			c := startClusterWith(t, testenv.Options{MetalLBCRDDir: dir})
			snap := &snapshot{}
			snap.set(threeByThree())
			rec := record.NewFakeRecorder(100)
			r := reconciler(t, c, sdktest.Build(t, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, snap, rec)
			if tc.wantErr != "" {
				if err := r.Sync(ctx); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("sync: %v; want an error naming the fix %q", err, tc.wantErr)
				}
				return
			}
			upstream := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "metallb.io/v1beta1", "kind": "BGPPeer",
				"metadata": map[string]any{"name": "worker-1-0", "namespace": "metallb-system", "labels": map[string]any{"cloud-provider": "equinix-metal"}},
				"spec": map[string]any{"myASN": int64(65000), "peerASN": int64(65530), "peerAddress": "169.254.255.1", "sourceAddress": "10.66.0.1",
					"nodeSelectors": []any{map[string]any{"matchLabels": map[string]any{"kubernetes.io/hostname": "worker-1"}}}}}}
			if _, err := c.dyn.Resource(peersGVR.GroupResource().WithVersion("v1beta1")).Namespace("metallb-system").Create(ctx, upstream,
				metav1.CreateOptions{FieldManager: "cloud-provider-equinix-metal"}); err != nil {
				t.Fatal(err)
			}
			if err := r.Sync(ctx); err != nil {
				t.Fatalf("sync over upstream's peer: %v", err)
			}
			checkAdoptedPeer(t, c)
			var resets []string
			for _, e := range drain(rec) {
				if strings.Contains(e, "FieldOwnershipReset") {
					resets = append(resets, e)
				}
			}
			if len(resets) != 1 || !strings.Contains(resets[0], "cloud-provider-equinix-metal (Update, metallb.io/v1beta1)") {
				t.Errorf("events %q, want one FieldOwnershipReset naming upstream's v1beta1 writes", resets)
			}
			// The next sync drops nothing more.
			if err := r.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := drain(rec); len(got) != 0 {
				t.Errorf("second sync: events %q", got)
			}
		})
	}
}

// checkAdoptedPeer: upstream's peer worker-1-0 is the module's now, and
// keeps no ownership at v1beta1.
func checkAdoptedPeer(t *testing.T, c *cluster) {
	t.Helper()
	peer := get(t, c, peersGVR, "metallb-system", "worker-1-0", nil)
	if peer.GetLabels()[sdk.OwnedLabel] != sdk.OwnedValue {
		t.Errorf("peer not adopted: labels %v", peer.GetLabels())
	}
	if _, ok, _ := unstructured.NestedMap(peer.Object, "spec", "passwordSecret"); !ok {
		t.Errorf("peer has no passwordSecret: the module's spec was not applied: %v", peer.Object["spec"])
	}
	for _, mf := range peer.GetManagedFields() {
		if mf.APIVersion != "metallb.io/v1beta2" {
			t.Errorf("managed fields of %s kept at %s", mf.Manager, mf.APIVersion)
		}
	}
}

// int32Maximum is how MetalLB <= 0.15 declares its ASNs: int32 with a
// maximum of 2^32-1, which Kubernetes 1.36 and later refuse in every write
// of a BGPPeer.
var int32Maximum = regexp.MustCompile(`(?m)^(\s+)format: int32\n\s+maximum: 4294967295\n`)

// crdsAsOlderKubernetesTook copies MetalLB's CRDs in dir without the ASN
// maximums Kubernetes >= 1.36 refuses: the CRDs as an apiserver that let
// upstream write its peers took them. Nothing else changes.
func crdsAsOlderKubernetesTook(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("CRDs in %s: %v", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = int32Maximum.ReplaceAll(b, []byte("${1}format: int32\n"))
		if err := os.WriteFile(filepath.Join(out, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
