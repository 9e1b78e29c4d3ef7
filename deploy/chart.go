package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ChartDir is the chart's directory relative to this package; `make
// manifests` writes a copy stamped with the build's version and image to
// bin/deploy/chart.
const ChartDir = "chart"

// ReleaseName is the release name the README's `helm install` uses.
const ReleaseName = "cloud-provider-equinix-metal"

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
	opts := common.ReleaseOptions{Name: ReleaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := util.ToRenderValuesWithSchemaValidation(ch, values, opts, common.DefaultCapabilities, false)
	if err != nil {
		return nil, fmt.Errorf("deploy: chart values: %w", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("deploy: rendering the chart: %w", err)
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
	return out, nil
}
