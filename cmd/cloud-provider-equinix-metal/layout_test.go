package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// machinery lists the folders of test and development machinery (relative
// to the module): everything else is product, which ARCHITECTURE.md maps.
var machinery = []string{
	"test",
	"sdk/sdktest",
	"modules/internal/golden",
}

func isMachinery(rel string) bool {
	for _, m := range machinery {
		if rel == m || strings.HasPrefix(rel, m+"/") {
			return true
		}
	}
	return false
}

// listedPackage is what the layout tests read of `go list -json`: the
// imports of the package's non-test files.
type listedPackage struct {
	ImportPath string
	Imports    []string
}

// modulePackages lists the packages of the repository's Go modules (the
// root one and nested ones such as the SDK's, except those of machinery) as
// "relative path → relative imports within the repository"; imports from
// elsewhere are dropped.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	const module = "github.com/metal-ccm/cloud-provider-equinix-metal"
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		return strings.CutPrefix(p, module+"/")
	}
	pkgs := map[string][]string{}
	for _, dir := range moduleDirs(t, "../..") {
		for _, p := range goList(t, dir) {
			from, ok := rel(p.ImportPath)
			if !ok {
				continue
			}
			var imports []string
			for _, imp := range p.Imports {
				if to, ok := rel(imp); ok {
					imports = append(imports, to)
				}
			}
			pkgs[from] = imports
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("go list -json ./... listed none of the module's packages")
	}
	return pkgs
}

// moduleDirs finds the folders with a go.mod below root, leaving out
// testdata, hidden folders and machinery.
func moduleDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		relDir, _ := filepath.Rel(root, p)
		relDir = filepath.ToSlash(relDir)
		if d.IsDir() && relDir != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || isMachinery(relDir)) {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("looking for go.mod files: %v", err)
	}
	return dirs
}

// goList is `go list -json args...` in dir; no args is ./... .
func goList(t *testing.T, dir string, args ...string) []listedPackage {
	t.Helper()
	if len(args) == 0 {
		args = []string{"./..."}
	}
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = dir
	what := "go list -json " + strings.Join(args, " ")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s in %s: %v\n%s", what, dir, err, ee.Stderr)
		}
		t.Fatalf("%s in %s: %v", what, dir, err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestProductImportsNoMachinery: the product never depends on the emulator,
// the test API server or other machinery, so machinery can change freely
// and nothing of it ships.
func TestProductImportsNoMachinery(t *testing.T) {
	for from, imports := range modulePackages(t) {
		if isMachinery(from) {
			continue
		}
		for _, to := range imports {
			if isMachinery(to) {
				t.Errorf("product package %s imports the machinery package %s; move what it needs into the product or move the package under test", from, to)
			}
		}
	}
}

// TestNoFolderImportCircle: Go forbids import cycles between packages, but
// not between folders (a/x imports b, b imports a/y). Such a circle makes
// the tree impossible to read top-down, so at every level of the tree the
// sibling folders (and the package of their parent folder, named ".") must
// import each other one way only.
func TestNoFolderImportCircle(t *testing.T) {
	// edges[parent][child] is the set of siblings that child imports.
	edges := map[string]map[string]map[string][]string{}
	for from, imports := range modulePackages(t) {
		for _, to := range imports {
			parent, a, b := siblings(from, to)
			if a == b {
				continue
			}
			if edges[parent] == nil {
				edges[parent] = map[string]map[string][]string{}
			}
			if edges[parent][a] == nil {
				edges[parent][a] = map[string][]string{}
			}
			edges[parent][a][b] = append(edges[parent][a][b], from+" → "+to)
		}
	}
	for parent, graph := range edges {
		if circle := findCircle(graph); circle != nil {
			var why []string
			for i := range len(circle) - 1 {
				why = append(why, graph[circle[i]][circle[i+1]][0])
			}
			t.Errorf("the folders of %s import each other in a circle %s (%s); one of them must stop importing the other",
				parent, strings.Join(circle, " → "), strings.Join(why, ", "))
		}
	}
}

// siblings names the two folders, children of the deepest folder holding
// both packages, through which from reaches to ("." is that folder's own
// package).
func siblings(from, to string) (parent, a, b string) {
	fs, ts := strings.Split(from, "/"), strings.Split(to, "/")
	if from == "." {
		fs = nil
	}
	if to == "." {
		ts = nil
	}
	i := 0
	for i < len(fs) && i < len(ts) && fs[i] == ts[i] {
		i++
	}
	parent = path.Join(append([]string{"."}, fs[:i]...)...)
	a, b = ".", "."
	if i < len(fs) {
		a = fs[i]
	}
	if i < len(ts) {
		b = ts[i]
	}
	return parent, a, b
}

// findCircle returns a circle of the graph (first node repeated at the
// end), or nil. Nodes are visited in sorted order so the answer is stable.
func findCircle(graph map[string]map[string][]string) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = open
		stack = append(stack, n)
		for _, m := range sortedKeys(graph[n]) {
			switch state[m] {
			case open:
				i := slices.Index(stack, m)
				return append(slices.Clone(stack[i:]), m)
			case unseen:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, n := range sortedKeys(graph) {
		if state[n] == unseen {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestSiblings(t *testing.T) {
	tests := []struct{ from, to, parent, a, b string }{
		{"modules/internal/golden", "host/lbmodule", ".", "modules", "host"},
		{"host/lbmodule", "modules", ".", "host", "modules"},
		{"host/provider", "host/eip", "host", "provider", "eip"},
		{"sdk/sdktest", "sdk", "sdk", "sdktest", "."},
		{"sdk", "sdk/abi", "sdk", ".", "abi"},
		{".", "host/x", ".", ".", "host"},
	}
	for _, tt := range tests {
		parent, a, b := siblings(tt.from, tt.to)
		if parent != tt.parent || a != tt.a || b != tt.b {
			t.Errorf("siblings(%q, %q) = %q, %q, %q; want %q, %q, %q", tt.from, tt.to, parent, a, b, tt.parent, tt.a, tt.b)
		}
	}
}

func TestFindCircle(t *testing.T) {
	g := map[string]map[string][]string{
		"modules": {"host": {"x"}},
		"host":    {"modules": {"y"}, "sdk": {"z"}},
	}
	if c := findCircle(g); !slices.Equal(c, []string{"host", "modules", "host"}) {
		t.Errorf("findCircle = %v; want host → modules → host", c)
	}
	delete(g["host"], "modules")
	if c := findCircle(g); c != nil {
		t.Errorf("findCircle on a one-way graph = %v; want none", c)
	}
}

// The pure floor: packages that read and write nothing, so the loops that do
// (host/eip, host/bgp, host/controlplane, host/lbmodule) stand on them and
// never the other way round, as MetalLB's controllers stand on its pure
// config compile. host/lbsnapshot holds the module's input and the Service
// rules and BGP node model those loops share.
var pureFloor = []string{"host/lbsnapshot"}

// pureFloorMayImport are the host packages a pure package may build on: the
// config-level ones (types and rules of values, no I/O of their own).
var pureFloorMayImport = []string{"host/config", "host/fieldmanager"}

// impureRule is an import the pure floor must not have: path and the paths
// below it. A deep rule holds behind the floor's imports too (no allowed
// import may bring it in); the others hold for its own imports only, as
// k8s.io/apimachinery itself reaches os and net/http.
type impureRule struct {
	path, why string
	deep      bool
}

var impureRules = []impureRule{
	{"k8s.io/client-go/kubernetes", "a clientset calls the API server", true},
	{"k8s.io/client-go/dynamic", "a dynamic client calls the API server", true},
	{"k8s.io/client-go/informers", "an informer watches the API server", true},
	{"k8s.io/client-go/listers", "a lister reads an informer's cache, which changes under its reader", true},
	{"k8s.io/client-go/tools/cache", "the informer machinery watches the API server", true},
	{"github.com/equinix/equinix-sdk-go", "it is the Equinix Metal API client", true},
	{modulePath + "/host/metal", "it is the CCM's Equinix Metal client and its caches", true},
	{"net/http", "it does network I/O", false},
	{"os", "it reads files, the environment or processes", false},
}

const modulePath = "github.com/metal-ccm/cloud-provider-equinix-metal"

// impureWhy says why the pure floor may not import p (directly when direct),
// or "" when it may.
func impureWhy(p string, direct bool) string {
	for _, r := range impureRules {
		if (p == r.path || strings.HasPrefix(p, r.path+"/")) && (direct || r.deep) {
			return r.why
		}
	}
	rel, ok := strings.CutPrefix(p, modulePath+"/")
	if ok && strings.HasPrefix(rel, "host/") && !slices.Contains(pureFloorMayImport, rel) {
		return "of host/ it may build only on the config-level " + strings.Join(pureFloorMayImport, ", ")
	}
	return ""
}

// impureImports walks pkg's dependency graph (import path → its imports)
// and describes every import the pure floor must not have, with the chain
// that brings it in. It does not walk past a reported import.
func impureImports(pkg string, graph map[string][]string) []string {
	var out []string
	via := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, to := range graph[from] {
			if _, seen := via[to]; seen {
				continue
			}
			via[to] = from
			if why := impureWhy(to, from == pkg); why != "" {
				out = append(out, fmt.Sprintf("%s imports %s (%s): %s; the pure floor reads and writes nothing, so give it the data instead (ARCHITECTURE.md, the package map)",
					short(pkg), short(to), chain(via, to), why))
				continue
			}
			queue = append(queue, to)
		}
	}
	sort.Strings(out)
	return out
}

// chain is the import path from the walk's start to p: "directly", or
// "through a → b".
func chain(via map[string]string, p string) string {
	var steps []string
	for q := via[p]; via[q] != ""; q = via[q] {
		steps = append([]string{short(q)}, steps...)
	}
	if len(steps) == 0 {
		return "directly"
	}
	return "through " + strings.Join(steps, " → ")
}

// short is an import path, relative within the module.
func short(p string) string { return strings.TrimPrefix(p, modulePath+"/") }

// TestPureFloor: the pure floor imports nothing that does I/O and no host
// package but the config-level ones, neither itself nor through what it
// imports, so it stays below the loops that use it.
func TestPureFloor(t *testing.T) {
	for _, rel := range pureFloor {
		graph := map[string][]string{}
		for _, p := range goList(t, "../..", "-deps", "./"+rel) {
			graph[p.ImportPath] = p.Imports
		}
		if _, ok := graph[modulePath+"/"+rel]; !ok {
			t.Fatalf("go list -deps ./%s did not list the package; is pureFloor out of date?", rel)
		}
		for _, msg := range impureImports(modulePath+"/"+rel, graph) {
			t.Error(msg)
		}
	}
}

func TestImpureImports(t *testing.T) {
	const floor = modulePath + "/host/floor"
	graph := map[string][]string{
		floor:                              {"os", "net/netip", modulePath + "/host/config", modulePath + "/host/eip", "k8s.io/apimachinery/pkg/types"},
		modulePath + "/host/config":        {"os", "net/http"}, // allowed behind an import
		modulePath + "/host/eip":           {modulePath + "/host/metal"},
		"k8s.io/apimachinery/pkg/types":    {"k8s.io/client-go/listers/core/v1"},
		"k8s.io/client-go/listers/core/v1": nil,
	}
	got := impureImports(floor, graph)
	want := []string{
		"host/floor imports host/eip (directly): of host/ it may build only",
		"host/floor imports k8s.io/client-go/listers/core/v1 (through k8s.io/apimachinery/pkg/types): a lister",
		"host/floor imports os (directly): it reads files",
	}
	if len(got) != len(want) {
		t.Fatalf("impureImports = %q; want %d messages starting %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("message %d = %q; want it to start %q", i, got[i], want[i])
		}
	}
}
