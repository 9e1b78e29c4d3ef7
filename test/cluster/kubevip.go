//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// KubeVIPImage is the name kube-vip's image is imported under.
const KubeVIPImage = "cluster.test/kube-vip:test"

// kubeVIPDaemonSet is the DaemonSet's name in kube-vip's own manifest.
const kubeVIPDaemonSet = "kube-vip-ds"

// kubeVIPManifest is what kube-vip's documentation for Equinix Metal tells
// a user to apply, written by the kube-vip binary itself: its RBAC
// (`kube-vip manifest rbac`) and a DaemonSet in BGP mode announcing
// Services from lo, reading its BGP settings from the node annotations
// the CCM writes under metal.equinix.com (`kube-vip manifest daemonset
// --interface lo --services --bgp --annotations metal.equinix.com
// --inCluster`). Two changes make it run here: the image is the one
// imported from the binary (nothing is pulled), and it tolerates the
// control-plane taint, as MetalLB's speakers do, so that every node
// announces.
func kubeVIPManifest(bin string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, args := range [][]string{
		{"manifest", "rbac"},
		{"manifest", "daemonset", "--interface", "lo", "--services", "--bgp", "--annotations", "metal.equinix.com", "--inCluster"},
	} {
		b, err := exec.Command(bin, args...).Output()
		if err != nil {
			return nil, fmt.Errorf("cluster: kube-vip %v: %w", args, err)
		}
		objs, err := decodeObjects(b)
		if err != nil {
			return nil, fmt.Errorf("cluster: kube-vip %v: %w", args, err)
		}
		out = append(out, objs...)
	}
	for _, u := range out {
		if u.GetKind() != "DaemonSet" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
		cs, _ := spec["containers"].([]any)
		if len(cs) != 1 {
			return nil, fmt.Errorf("cluster: kube-vip's DaemonSet has %d containers: want 1", len(cs))
		}
		ct := cs[0].(map[string]any)
		ct["image"], ct["imagePullPolicy"] = KubeVIPImage, "Never"
		spec["tolerations"] = []any{map[string]any{"key": controlPlaneLabel, "operator": "Exists", "effect": "NoSchedule"}}
		if err := unstructured.SetNestedMap(u.Object, spec, "spec", "template", "spec"); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, fmt.Errorf("cluster: kube-vip wrote no DaemonSet")
}

// kubeVIPImage is kube-vip's image: the binary as its entrypoint (its
// manifest's args are "manager").
func kubeVIPImage(bin string) (nodeImage, error) {
	img, err := hostFilesImage(map[string]string{"/kube-vip": bin}, false, []string{"/kube-vip"}, nil)
	if err != nil {
		return nodeImage{}, err
	}
	return nodeImage{KubeVIPImage, img}, nil
}

// waitKubeVIP: kube-vip's pod is ready on every node. (It peers once the
// CCM has annotated its node, and announces a Service once the CCM has
// given it an address.)
func (c *Cluster) waitKubeVIP(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		return c.speakersReady(ctx, CCMNamespace, kubeVIPDaemonSet, &last)
	})
	if err != nil {
		return fmt.Errorf("cluster: kube-vip (%s; %s): %w", last, c.podSummary(CCMNamespace), err)
	}
	return nil
}
