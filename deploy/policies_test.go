package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/policy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
)

// readmeSnippet is the custom-policy overlay snippet of README.md, as a
// user copies it.
func readmeSnippet(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Custom policies")
	if i < 0 {
		t.Fatal(`README.md has no "## Custom policies" section`)
	}
	s = s[i:]
	start := strings.Index(s, "```yaml\n")
	end := strings.Index(s[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("README.md's custom-policy section has no yaml block")
	}
	return s[start+8 : start+8+end]
}

// TestCustomPolicySnippet renders README.md's custom-policy snippet as an
// overlay of the MetalLB overlay with two example policies, writes the
// resulting ConfigMap as the mounted directory, and loads it with the
// CCM's loader: it must load, with the user's files and the defaults the
// user did not replace. With behavior: replace the same overlay loses
// labelselector.rego and the loader refuses it — the crash-loop the
// snippet used to cause.
func TestCustomPolicySnippet(t *testing.T) {
	snippet := readmeSnippet(t)
	eip, err := os.ReadFile("../examples/policies/eip-majority-metro/eip.rego")
	if err != nil {
		t.Fatal(err)
	}
	bgp, err := os.ReadFile("../examples/policies/bgp-no-control-plane/bgp.rego")
	if err != nil {
		t.Fatal(err)
	}
	render := func(snippet string) map[string]string {
		t.Helper()
		objs, err := deploycheck.RenderWith("overlays/my-policies", map[string][]byte{
			"overlays/my-policies/kustomization.yaml": []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../metallb]\n" + snippet),
			"overlays/my-policies/eip.rego":           eip,
			"overlays/my-policies/bgp.rego":           bgp,
		})
		if err != nil {
			t.Fatal(err)
		}
		cm := find(objs, "ConfigMap", deploy.Namespace, deploy.PoliciesConfigMap)
		if cm == nil {
			t.Fatalf("the overlay has no ConfigMap %s", deploy.PoliciesConfigMap)
		}
		data := map[string]string{}
		for k, v := range cm.Object["data"].(map[string]any) {
			data[k] = v.(string)
		}
		return data
	}
	mount := func(data map[string]string) string {
		dir := t.TempDir()
		for name, content := range data {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}

	data := render(snippet)
	if data["eip.rego"] != string(eip) || data["bgp.rego"] != string(bgp) {
		t.Fatal("the rendered ConfigMap does not hold the overlay's eip.rego and bgp.rego")
	}
	if _, ok := data["labelselector.rego"]; !ok {
		t.Fatalf("the rendered ConfigMap lost labelselector.rego; it holds %d files", len(data))
	}
	if _, err := policy.Load(context.Background(), mount(data), policy.Options{}); err != nil {
		t.Fatalf("the policies of README.md's snippet do not load: %v", err)
	}

	replaced := render(strings.Replace(snippet, "behavior: merge", "behavior: replace", 1))
	if _, err := policy.Load(context.Background(), mount(replaced), policy.Options{}); err == nil {
		t.Fatal("with behavior: replace (labelselector.rego dropped) the policies loaded; the README's warning would be wrong")
	}
}
