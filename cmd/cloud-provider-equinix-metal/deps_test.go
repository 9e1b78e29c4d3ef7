package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The CCM binary links product code only: test and development machinery
// (test/..., the SDK's test helper) and the standard library's
// testing packages stay out, so what ships is what ARCHITECTURE.md calls
// the product.
func TestBinaryLinksNoTestMachinery(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/metal-ccm/cloud-provider-equinix-metal/"
	forbidden := []string{"testing", "testing/fstest", "testing/iotest", "testing/quick", "net/http/httptest"}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if pkg == f {
				t.Errorf("the CCM binary links %s", pkg)
			}
		}
		rel, ours := strings.CutPrefix(pkg, module)
		if ours && (rel == "test" || strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "sdk/sdktest") || strings.Contains(rel, "internal/golden")) {
			t.Errorf("the CCM binary links test machinery %s", pkg)
		}
	}
}
