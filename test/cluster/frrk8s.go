//go:build linux

package cluster

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// frrK8sDaemonSet is the DaemonSet of MetalLB's FRR-K8s manifest
// (metallb-frr-k8s.yaml) that runs frr-k8s beside FRR on every node.
const frrK8sDaemonSet = "frr-k8s-daemon"

// frrK8sGroup is the API group of frr-k8s' own resources (FRRConfiguration
// and its kin): their CRDs come from MetalLB's manifest, as testenv
// installs MetalLB's only.
const frrK8sGroup = "frrk8s.metallb.io"

// frrK8sDaemon makes MetalLB's FRR-K8s manifest run with FRR outside the
// pods, as frrSpeaker does for FRR mode: the frr-k8s DaemonSet keeps only
// its controller container (frr-k8s itself, which renders each node's
// FRRConfigurations into frr.conf and signals the reloader), whose
// /etc/frr_reloader becomes the node's directory of this process's
// reloader (startFRR: Debian's bgpd on the node, frr-reload.py). Gone are
// the containers of FRR, its reloader, metrics and status exporters (they
// need an image this machine cannot pull; MetalLB reads none of what the
// status exporter writes), the init containers that copy their files, and
// the status cleaner's Deployment (a webhook and its certificates).
// hostPID replaces shareProcessNamespace: the reloader's pid is in the
// host's PID namespace.
func frrK8sDaemon(objs []*unstructured.Unstructured, hostDir string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	found := false
	for _, u := range objs {
		if u.GetKind() == "Deployment" && strings.HasSuffix(u.GetName(), "statuscleaner") {
			continue
		}
		out = append(out, u)
		if u.GetKind() != "DaemonSet" || u.GetName() != frrK8sDaemonSet {
			continue
		}
		found = true
		spec, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
		cs, _ := spec["containers"].([]any)
		var ctl map[string]any
		for _, c := range cs {
			if m := c.(map[string]any); m["name"] == "controller" {
				ctl = m
			}
		}
		if ctl == nil {
			return nil, fmt.Errorf("cluster: %s has no controller container", frrK8sDaemonSet)
		}
		mounts, _ := ctl["volumeMounts"].([]any)
		var keep []any
		for _, m := range mounts {
			if mm := m.(map[string]any); mm["mountPath"] == "/etc/frr_reloader" {
				mm["name"], mm["subPathExpr"] = "frr-reloader", "frr-$(NODE_NAME)"
				keep = append(keep, mm)
			}
		}
		if len(keep) != 1 {
			return nil, fmt.Errorf("cluster: %s's controller mounts no /etc/frr_reloader", frrK8sDaemonSet)
		}
		ctl["volumeMounts"] = keep
		spec["containers"] = []any{ctl}
		delete(spec, "initContainers")
		delete(spec, "shareProcessNamespace")
		spec["hostPID"] = true
		spec["volumes"] = []any{map[string]any{"name": "frr-reloader",
			"hostPath": map[string]any{"path": hostDir, "type": "Directory"}}}
		if err := unstructured.SetNestedMap(u.Object, spec, "spec", "template", "spec"); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, fmt.Errorf("cluster: MetalLB's manifest has no %s DaemonSet: is it metallb-frr-k8s.yaml?", frrK8sDaemonSet)
	}
	return out, nil
}

// frrK8sImage is the image the frr-k8s DaemonSet's controller names, with
// the frr-k8s binary built here as its /frr-k8s.
func frrK8sImage(objs []*unstructured.Unstructured, bin string) (nodeImage, error) {
	for _, u := range objs {
		if u.GetKind() != "DaemonSet" || u.GetName() != frrK8sDaemonSet {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			if m := c.(map[string]any); m["name"] == "controller" {
				ref, _ := m["image"].(string)
				img, err := hostFilesImage(map[string]string{"/frr-k8s": bin}, false, []string{"/frr-k8s"}, nil)
				if err != nil {
					return nodeImage{}, err
				}
				return nodeImage{ref, img}, nil
			}
		}
	}
	return nodeImage{}, fmt.Errorf("cluster: MetalLB's manifest names no frr-k8s image")
}
