// Package deploy holds the Kubernetes manifests of the CCM (a kustomize base,
// one overlay per load balancer, and the Secret template) and the Go helpers
// that test them against a real kube-apiserver: Render builds a kustomization
// from the embedded files exactly as `kubectl apply -k` would, Install puts
// objects into a cluster, and CheckAllowed asks the API server whether the
// CCM's ServiceAccount may make each of a list of API calls.
//
// Integration tests use CheckAllowed with the calls read back from
// test/testenv's audit log, so every request the CCM makes in a test is
// proven to be allowed by these manifests, and the manifests cannot grant
// less than the code needs without a test failing.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The manifests, embedded so that tests in any package render the same files
// whatever their working directory.
//
//go:embed kustomization.yaml base overlays components template
var manifests embed.FS

const (
	// Namespace is where the CCM and its namespaced objects live.
	Namespace = "kube-system"
	// ServiceAccountName is the CCM's ServiceAccount (upstream's name).
	ServiceAccountName = "cloud-controller-manager"
	// SecretName is the Secret holding cloud-sa.json.
	SecretName = "metal-cloud-config"
	// SecretKey is the key of the cloud-config file in SecretName.
	SecretKey = "cloud-sa.json"
	// PoliciesConfigMap holds the default policies, mounted at PolicyDir.
	PoliciesConfigMap = "metal-ccm-policies"
	// PolicyDir is where the Deployment mounts the policies.
	PolicyDir = "/etc/ccm/policies"
	// SecretTemplate is the embedded path of the Secret template.
	SecretTemplate = "template/secret.yaml"
)

// Render builds the kustomization in dir ("." for the default install, or
// an overlay such as "overlays/metallb") with the default options of
// `kubectl apply -k` (files only from inside the kustomization root) and
// returns its objects in kustomize's order.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	return RenderWith(dir, nil)
}

// RenderWith is Render with more files next to the embedded manifests
// (path relative to deploy/ -> content), for example a user's overlay as a
// README shows it.
func RenderWith(dir string, extra map[string][]byte) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	for p, b := range extra {
		if err := mem.WriteFile(path.Join("/", p), b); err != nil {
			return nil, fmt.Errorf("deploy: %s: %w", p, err)
		}
	}
	err := fs.WalkDir(manifests, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := manifests.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, b)
	})
	if err != nil {
		return nil, fmt.Errorf("deploy: copying the embedded manifests: %w", err)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, path.Join("/", dir))
	if err != nil {
		return nil, fmt.Errorf("deploy: kustomize build %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON, so numbers are int64/float64 as everywhere else in
		// client-go (kustomize's maps hold int, which DeepCopy rejects).
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("deploy: kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("deploy: kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		out = append(out, u)
	}
	return out, nil
}

// RBACObjects keeps the ServiceAccount and the RBAC objects of objs: what a
// test installs to run the CCM under these manifests' rights.
func RBACObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if (gvk.Group == "" && gvk.Kind == "ServiceAccount") || gvk.Group == "rbac.authorization.k8s.io" {
			out = append(out, o)
		}
	}
	return out
}
