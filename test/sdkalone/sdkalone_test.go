package sdkalone_test

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/mdblock"
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
	sdkDir := sdkDir(t)
	mod := map[string]string{}
	for name, text := range files {
		mod[name] = strings.ReplaceAll(text, "SDK_DIR", sdkDir)
	}
	dir := writeModule(t, sdkDir, mod)

	mf, data := tidy(t, dir)
	if !strings.Contains(string(data), sdkPath+" v0.1.0") {
		t.Errorf("go mod tidy dropped the SDK requirement:\n%s", data)
	}
	noKubernetes(t, dir, mf, data)

	out := goCmd(t, dir, "test", "-count=1", "./...")
	t.Logf("go test in %s:\n%s", dir, out)
}

// readmeCheckout is the placeholder for the checkout's sdk directory in the
// README's go.mod, the one thing a reader changes.
const readmeCheckout = "/path/to/checkout/sdk"

// TestREADMEModuleWorksAsPrinted: sdk/README.md is what a new module author
// starts from, so its go.mod, main.go and main_test.go, as printed, make a
// module whose go mod tidy adds what the README says and whose go test
// passes, and its build command is sdktest.Build's.
func TestREADMEModuleWorksAsPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's module outside the repository with go mod tidy and go test; run without -short")
	}
	sdkDir := sdkDir(t)
	readme, err := os.ReadFile(filepath.Join(sdkDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := mdblock.Marked(string(readme), "sdkalone")
	if err != nil {
		t.Fatalf("sdk/README.md: %v", err)
	}
	for _, name := range []string{"go.mod", "main.go", "main_test.go", "build"} {
		if _, ok := blocks[name]; !ok {
			t.Fatalf("sdk/README.md has no block marked <!-- sdkalone: %s -->; the README's module is tested from its marked blocks", name)
		}
	}
	for _, name := range []string{"main.go", "main_test.go"} {
		if got, err := format.Source([]byte(blocks[name])); err != nil || string(got) != blocks[name] {
			t.Errorf("the README's %s is not gofmt'd (%v); as gofmt prints it:\n%s", name, err, got)
		}
	}
	if !strings.Contains(blocks["go.mod"], readmeCheckout) {
		t.Fatalf("the README's go.mod does not name the checkout as %s:\n%s", readmeCheckout, blocks["go.mod"])
	}
	dir := writeModule(t, sdkDir, map[string]string{
		"go.mod":       strings.ReplaceAll(blocks["go.mod"], readmeCheckout, sdkDir),
		"main.go":      blocks["main.go"],
		"main_test.go": blocks["main_test.go"],
	})

	mf, data := tidy(t, dir)
	noKubernetes(t, dir, mf, data)
	claimed, err := tidyClaim(string(readme))
	if err != nil {
		t.Fatalf("sdk/README.md: %v", err)
	}
	var added []string
	for _, r := range mf.Require {
		if r.Mod.Path == sdkPath {
			continue
		}
		added = append(added, r.Mod.Path)
		if !r.Indirect {
			t.Errorf("go mod tidy added %s as a direct requirement; the README says all are indirect:\n%s", r.Mod.Path, data)
		}
	}
	slices.Sort(added)
	if !slices.Equal(added, claimed) {
		t.Errorf("go mod tidy added %v, the README says it adds %v:\n%s", added, claimed, data)
	}

	out := goCmd(t, dir, "test", "-count=1", "./...")
	t.Logf("go test in %s:\n%s", dir, out)

	checkBuildCommand(t, sdkDir, dir, blocks["build"])
}

// checkBuildCommand runs the first line of the README's build block in dir
// (environment assignments, then go build and its arguments) and checks
// that its environment and arguments are those of sdktest.Build, as the
// README says, so a build after go test comes from the build cache.
func checkBuildCommand(t *testing.T, sdkDir, dir, block string) {
	t.Helper()
	fields := strings.Fields(strings.SplitN(block, "\n", 2)[0])
	var env, args []string
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		env, fields = append(env, fields[0]), fields[1:]
	}
	if len(fields) < 2 || fields[0] != "go" || fields[1] != "build" {
		t.Fatalf("the README's build command is not VAR=value... go build ...: %q", block)
	}
	out := ""
	for i := 1; i < len(fields); i++ {
		if fields[i] == "-o" && i+1 < len(fields) {
			out = fields[i+1]
			i++
			continue
		}
		args = append(args, fields[i])
	}
	src, err := os.ReadFile(filepath.Join(sdkDir, "sdktest", "sdktest.go"))
	if err != nil {
		t.Fatal(err)
	}
	// sdktest.Build's exec.Command("go", …) and cmd.Env = append(os.Environ(), …),
	// less the output path, which is not a literal there.
	wantArgs := literals(regexp.MustCompile(`exec\.Command\("go", (.*)\)\n`).FindSubmatch(src))
	wantEnv := literals(regexp.MustCompile(`cmd\.Env = append\(os\.Environ\(\), (.*)\)\n`).FindSubmatch(src))
	if wantArgs == nil || wantEnv == nil {
		t.Fatal("cannot find sdktest.Build's go command in sdk/sdktest/sdktest.go; update this test to where it is")
	}
	wantArgs = slices.DeleteFunc(wantArgs, func(a string) bool { return a == "-o" })
	if !slices.Equal(args, wantArgs) || !slices.Equal(env, wantEnv) || out == "" {
		t.Errorf("the README builds with %v go %v -o %q; sdktest.Build with %v go %v and -o", env, args, out, wantEnv, wantArgs)
	}

	cmd := exec.Command("go", fields[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off"), env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's build command in %s: %v\n%s", dir, err, msg)
	}
	if wasm, err := os.ReadFile(filepath.Join(dir, out)); err != nil || !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		t.Errorf("the README's build command made no WebAssembly module %s (%v)", out, err)
	}
}

// literals returns the Go string literals in m[1], or nil if m is nil.
func literals(m [][]byte) []string {
	if m == nil {
		return nil
	}
	var out []string
	for _, q := range regexp.MustCompile(`"[^"]*"`).FindAll(m[1], -1) {
		s, err := strconv.Unquote(string(q))
		if err != nil {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// tidyClaim returns, sorted, the module paths the README names in its
// sentence "`go mod tidy`: it adds … and nothing else".
func tidyClaim(md string) ([]string, error) {
	start := strings.Index(md, "`go mod tidy`: it adds")
	if start < 0 {
		return nil, fmt.Errorf("no sentence \"`go mod tidy`: it adds … and nothing else\"")
	}
	end := strings.Index(md[start:], "nothing else")
	if end < 0 {
		return nil, fmt.Errorf("the sentence \"`go mod tidy`: it adds …\" does not end in \"and nothing else\"")
	}
	var paths []string
	for _, m := range regexp.MustCompile("`([a-z0-9-]+(?:\\.[a-z0-9-]+)+/[^`]+)`").FindAllStringSubmatch(md[start:start+end], -1) {
		paths = append(paths, m[1])
	}
	slices.Sort(paths)
	return paths, nil
}

// sdkDir is this checkout's sdk directory.
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeModule writes files into a fresh directory outside the repository,
// where no go.work or go.mod of the repository applies.
func writeModule(t *testing.T, sdkDir string, files map[string]string) string {
	t.Helper()
	repo := filepath.Dir(sdkDir)
	dir := t.TempDir()
	if rel, err := filepath.Rel(repo, dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary directory %s is inside the repository %s; set TMPDIR elsewhere", dir, repo)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tidy runs go mod tidy in dir and returns the resulting go.mod.
func tidy(t *testing.T, dir string) (*modfile.File, []byte) {
	t.Helper()
	goCmd(t, dir, "mod", "tidy")
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mf, data
}

// noKubernetes fails if the module in dir requires or links anything of
// Kubernetes: the SDK module must not pull it in.
func noKubernetes(t *testing.T, dir string, mf *modfile.File, data []byte) {
	t.Helper()
	var reqs []string
	for _, r := range mf.Require {
		reqs = append(reqs, r.Mod.Path)
		if strings.HasPrefix(r.Mod.Path, "k8s.io/") || strings.HasPrefix(r.Mod.Path, "sigs.k8s.io/") {
			t.Errorf("the module's go.mod requires %s; the SDK module must not pull in Kubernetes:\n%s", r.Mod.Path, data)
		}
	}
	t.Logf("the module's go.mod after go mod tidy requires %d modules: %s", len(reqs), strings.Join(reqs, ", "))
	deps := goCmd(t, dir, "list", "-deps", "-test", "./...")
	if strings.Contains(deps, "k8s.io/") {
		t.Errorf("the module's packages (with tests) link Kubernetes packages:\n%s", deps)
	}
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
