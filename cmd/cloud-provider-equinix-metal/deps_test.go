package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
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

// testDepsComment opens go.mod's require block of modules that only tests
// and tooling import.
const testDepsComment = "Tests and tooling only"

// go.mod says which of its direct requirements ship: the first require
// block holds the modules the CCM binary or a built-in module links, a
// block under a "Tests and tooling only" comment the ones only tests,
// test/ and hack/ import. They cannot move to a module of their own:
// host/ packages' own tests start test/testenv's API server (which needs
// apiextensions-apiserver, controller-runtime and MetalLB's CRDs), so the
// main module's graph would list them all the same.
func TestGoModSeparatesTestDeps(t *testing.T) {
	shipped := linkedModules(t)
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Indirect {
			continue
		}
		testOnly := inTestDepsBlock(f, r)
		switch {
		case testOnly && shipped[r.Mod.Path]:
			t.Errorf("go.mod:%d: %s is in the %q block, but the CCM binary or a built-in module links it; move it to the first require block", r.Syntax.Start.Line, r.Mod.Path, testDepsComment)
		case !testOnly && !shipped[r.Mod.Path]:
			t.Errorf("go.mod:%d: %s is a direct requirement nothing shipped links; move it to the %q require block", r.Syntax.Start.Line, r.Mod.Path, testDepsComment)
		}
	}
}

// linkedModules are the modules of every package the CCM binary links and
// of every built-in Wasm module (the CCM embeds them).
func linkedModules(t *testing.T) map[string]bool {
	t.Helper()
	mods := map[string]bool{}
	for _, c := range []*exec.Cmd{
		exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "."),
		exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "../../modules/..."),
	} {
		if strings.Contains(c.Args[len(c.Args)-1], "modules") {
			c.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		}
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
		}
		for _, m := range strings.Fields(string(out)) {
			mods[m] = true
		}
	}
	return mods
}

// inTestDepsBlock reports whether r sits in a require block whose comment
// starts with testDepsComment.
func inTestDepsBlock(f *modfile.File, r *modfile.Require) bool {
	for _, stmt := range f.Syntax.Stmt {
		block, ok := stmt.(*modfile.LineBlock)
		if !ok || !slices.Contains(block.Line, r.Syntax) {
			continue
		}
		for _, c := range block.Before {
			if strings.Contains(c.Token, testDepsComment) {
				return true
			}
		}
	}
	return false
}
