package deploy

import (
	"fmt"
	"io/fs"
	"path"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Kustomizations lists the directories that `kubectl apply -k` accepts: "."
// (the default install) and every overlay, sorted.
func Kustomizations() []string {
	dirs := []string{"."}
	entries, err := fs.ReadDir(manifests, "overlays")
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
	b, err := manifests.ReadFile(SecretTemplate)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("deploy: %s: %w", SecretTemplate, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}
