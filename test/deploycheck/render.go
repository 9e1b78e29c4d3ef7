package deploycheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
)

// Render builds the kustomization in dir ("." for the default install, or
// an overlay such as "overlays/metallb") with the default options of
// `kubectl apply -k` (files only from inside the kustomization root) and
// returns its objects in kustomize's order.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	return RenderWith(dir, nil)
}

// RenderWith is Render with more files next to the embedded deploy.Manifests
// (path relative to deploy/ -> content), for example a user's overlay as a
// README shows it.
func RenderWith(dir string, extra map[string][]byte) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	for p, b := range extra {
		if err := mem.WriteFile(path.Join("/", p), b); err != nil {
			return nil, fmt.Errorf("deploy: %s: %w", p, err)
		}
	}
	err := fs.WalkDir(deploy.Manifests, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := deploy.Manifests.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, b)
	})
	if err != nil {
		return nil, fmt.Errorf("deploy: copying the embedded deploy.Manifests: %w", err)
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
// test installs to run the CCM under these deploy.Manifests' rights.
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

// Kustomizations lists the directories that `kubectl apply -k` accepts: "."
// (the default install) and every overlay, sorted.
func Kustomizations() []string {
	dirs := []string{"."}
	entries, err := fs.ReadDir(deploy.Manifests, "overlays")
	if err != nil {
		panic(err) // embedded at build time; cannot fail
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, path.Join("overlays", e.Name()))
		}
	}
	sort.Strings(dirs)
	return dirs
}

// SecretTemplateObject returns the Secret template as an object.
func SecretTemplateObject() (*unstructured.Unstructured, error) {
	b, err := deploy.Manifests.ReadFile(deploy.SecretTemplate)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("deploy: %s: %w", deploy.SecretTemplate, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// LoadChart reads the chart in dir with Helm's loader (which honours
// .helmignore, as `helm install <dir>` does).
func LoadChart(dir string) (*chartv2.Chart, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("deploy: loading the chart %s: %w", dir, err)
	}
	return ch, nil
}

// RenderChart renders ch as `helm install --namespace namespace` would with
// values (the -f files merged): the values are checked against
// values.schema.json first, and the objects come back in file order.
func RenderChart(ch *chartv2.Chart, values map[string]any, namespace string) ([]*unstructured.Unstructured, error) {
	files, err := renderChartFiles(ch, values, namespace)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if path.Ext(n) == ".yaml" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, n := range names {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(files[n])), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("deploy: %s: %w", n, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GetNamespace() == "" && !strings.HasPrefix(u.GetKind(), "Cluster") {
				u.SetNamespace(namespace) // as helm install does for namespaced objects
			}
			out = append(out, u)
		}
	}
	// Helm applies in its install order by kind (a Secret before the
	// Deployment that mounts it), not in its template files' order; in
	// the files' order a pod of an upgraded Deployment can start with the
	// Secret it mounts still unchanged.
	rank := func(kind string) int {
		if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
			return i
		}
		return len(releaseutil.InstallOrder)
	}
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return rank(a.GetKind()) - rank(b.GetKind()) })
	return out, nil
}

// RenderChartNotes renders the chart's templates/NOTES.txt as `helm
// install` prints it after the install.
func RenderChartNotes(ch *chartv2.Chart, values map[string]any, namespace string) (string, error) {
	files, err := renderChartFiles(ch, values, namespace)
	if err != nil {
		return "", err
	}
	notes, ok := files[path.Join(ch.Name(), "templates", "NOTES.txt")]
	if !ok {
		return "", fmt.Errorf("deploy: the chart has no templates/NOTES.txt")
	}
	return strings.TrimSpace(notes), nil
}

// renderChartFiles renders every template of ch (the values checked
// against values.schema.json first), by its path in the chart.
func renderChartFiles(ch *chartv2.Chart, values map[string]any, namespace string) (map[string]string, error) {
	opts := common.ReleaseOptions{Name: deploy.ReleaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := util.ToRenderValuesWithSchemaValidation(ch, values, opts, common.DefaultCapabilities, false)
	if err != nil {
		return nil, fmt.Errorf("deploy: chart values: %w", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("deploy: rendering the chart: %w", err)
	}
	return files, nil
}
