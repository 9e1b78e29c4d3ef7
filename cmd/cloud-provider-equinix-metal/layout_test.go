package main

import (
	"bytes"
	"encoding/json"
	"errors"
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

// goList is `go list -json ./...` in dir.
func goList(t *testing.T, dir string) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -json ./... in %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("go list -json ./... in %s: %v", dir, err)
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
