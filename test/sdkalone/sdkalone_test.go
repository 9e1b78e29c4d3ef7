package sdkalone_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

const sdkPath = "github.com/metal-ccm/cloud-provider-equinix-metal/sdk"

// A module outside the repository, as its author would write it: go.mod
// requires the SDK at a version (replaced by this checkout's sdk/, as a
// published tag would be fetched), a module, and a test that runs the built
// .wasm through sdktest.
var files = map[string]string{
	"go.mod": `module example.com/lb-module

go 1.25.0

require ` + sdkPath + ` v0.1.0

replace ` + sdkPath + ` => SDK_DIR
`,
	"main.go": `package main

import "github.com/metal-ccm/cloud-provider-equinix-metal/sdk"

func describe(o sdk.Options) (sdk.Description, error) {
	return sdk.Description{Emits: []sdk.ObjectKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: o.Namespace}}}, nil
}

// generate publishes one ConfigMap per Service with its first address.
func generate(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	var resp sdk.GenerateResponse
	for _, s := range req.Services {
		resp.Objects = append(resp.Objects, sdk.Object{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": s.Namespace + "." + s.Name, "namespace": req.Options.Namespace},
			"data":     map[string]any{"ip": s.IPs[0]},
		})
	}
	return resp, nil
}

func init() {
	sdk.Register(sdk.Module{Name: "outside", Version: "0.1.0", Describe: describe, Generate: generate})
}

func main() {}
`,
	"main_test.go": `package main

import (
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
)

func TestWasm(t *testing.T) {
	wasm := sdktest.Build(t, ".")
	resp, err := sdktest.Generate(t, wasm, sdk.Options{Namespace: "lb"}, sdktest.Snapshot(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Objects) != 3 || resp.Objects[0].Namespace() != "lb" {
		t.Fatalf("objects = %v", resp.Objects)
	}
	// The runtime's validation is the CCM's: a name it refuses fails here.
	req := sdktest.Snapshot(1, 0)
	req.Services[0].Name = "Not_Valid"
	if _, err := sdktest.Generate(t, wasm, sdk.Options{Namespace: "lb"}, req); err == nil || !strings.Contains(err.Error(), "whose name is invalid") {
		t.Fatalf("got %v, want the CCM's refusal of an invalid object name", err)
	}
}
`,
}

func TestModuleAuthorNeedsTheSDKAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module outside the repository with go mod tidy and go test; run without -short")
	}
	sdkDir, err := filepath.Abs(filepath.Join("..", "..", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Dir(sdkDir)
	dir := t.TempDir()
	if rel, err := filepath.Rel(repo, dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary directory %s is inside the repository %s; set TMPDIR elsewhere", dir, repo)
	}
	for name, text := range files {
		text = strings.ReplaceAll(text, "SDK_DIR", sdkDir)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	goCmd(t, dir, "mod", "tidy")
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []string
	for _, r := range mf.Require {
		reqs = append(reqs, r.Mod.Path)
		if strings.HasPrefix(r.Mod.Path, "k8s.io/") || strings.HasPrefix(r.Mod.Path, "sigs.k8s.io/") {
			t.Errorf("the module's go.mod requires %s; the SDK module must not pull in Kubernetes:\n%s", r.Mod.Path, data)
		}
	}
	if !strings.Contains(string(data), sdkPath+" v0.1.0") {
		t.Errorf("go mod tidy dropped the SDK requirement:\n%s", data)
	}
	t.Logf("the module's go.mod after go mod tidy requires %d modules: %s", len(reqs), strings.Join(reqs, ", "))
	deps := goCmd(t, dir, "list", "-deps", "-test", "./...")
	if strings.Contains(deps, "k8s.io/") {
		t.Errorf("the module's packages (with tests) link Kubernetes packages:\n%s", deps)
	}

	out := goCmd(t, dir, "test", "-count=1", "./...")
	t.Logf("go test in %s:\n%s", dir, out)
}

// goCmd runs go in dir as a module author would: module mode, no workspace,
// requirements fetched as needed.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}
