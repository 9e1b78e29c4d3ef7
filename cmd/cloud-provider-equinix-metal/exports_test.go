package main

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHostExportsUsed fails on every exported package-level name of a
// package under host/ (func, type, var or const, declared in the package's
// non-test files) that no other package names. Every exported name is API
// a reader has to keep in mind; one that nothing outside its package uses
// only widens the package's surface, and one used only by tests ships
// code for tests.
//
// "Other package" means a package in another folder of the root module:
// product, machinery under test/, commands, their test files and external
// _test packages alike. Uses from the package's own folder (the package,
// its internal tests and its external _test package) do not count: an
// external test may reach an unexported name through an export_test.go.
// The nested modules (sdk/, test/testenv/k8sbins, test/testenv/corednsbin) are not read: none
// requires the root module, so none can import host/.
//
// Out of scope: methods and struct fields (a method may be needed by an
// interface elsewhere, and a field by encoding), and names declared in
// _test.go files. A use is a selector expression pkg.Name whose pkg is an
// import of the host package (under its declared package name or the name
// it is imported as), or, after a dot import, a bare Name; the check
// parses files only (go/parser, no type checking).
//
// One use is not a name in another package: a type returned by an
// exported function that is itself used (its results name the type, as
// itself or behind a pointer, slice, map...) counts as used. A caller may
// only ever receive the type from the function and never spell it, but a
// reader of `go doc` sees the function's signature and needs the name to
// look the type up; TestExportedFuncsReturnExportedTypes requires it to be
// exported. Only package-level functions lend their use, not methods.
func TestHostExportsUsed(t *testing.T) {
	root := repoRootDir(t)
	module := rootModulePath(t, root)
	dirs := rootModuleGoFiles(t, root)
	fset := token.NewFileSet()

	// The host packages: folder → its import path, declared name and
	// exported names.
	host := map[string]*hostPackage{}
	for dir, files := range dirs {
		if dir != "host" && !strings.HasPrefix(dir, "host/") {
			continue
		}
		p := &hostPackage{dir: dir, importPath: module + "/" + dir, exports: map[string]hostExport{}}
		var funcs []*ast.FuncDecl
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(root, dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			p.name = f.Name.Name
			for _, e := range exportedDecls(f) {
				e.where = path.Join(dir, name) + ":" + strconv.Itoa(fset.Position(e.pos).Line)
				p.exports[e.name] = e
			}
			funcs = append(funcs, exportedFuncs(f)...)
		}
		p.returns = returnedTypes(funcs, p.exports)
		if p.name != "" {
			host[p.importPath] = p
		}
	}
	if len(host) == 0 {
		t.Fatal("found no Go package under host/")
	}

	// used[import path][name]: named from another folder.
	used := map[string]map[string]bool{}
	for dir, files := range dirs {
		for _, name := range files {
			file := filepath.Join(root, dir, name)
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(src, []byte(`"`+module+"/host")) {
				continue // imports no host package
			}
			f, err := parser.ParseFile(fset, file, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			recordHostUses(f, dir, host, used)
		}
	}
	markReturnedTypes(host, used)

	total, unused := 0, 0
	for _, importPath := range sortedKeys(host) {
		p := host[importPath]
		for _, name := range sortedKeys(p.exports) {
			total++
			if used[importPath][name] {
				continue
			}
			unused++
			e := p.exports[name]
			t.Errorf("%s.%s (%s, %s) is exported but no package outside %s uses it: unexport it, or move it to the test files that use it",
				p.dir, name, e.kind, e.where, p.dir)
		}
	}
	t.Logf("host/ packages export %d package-level names; %d of them are used by no other package", total, unused)
}

type hostPackage struct {
	dir, importPath, name string
	exports               map[string]hostExport
	// returns maps an exported function to the exported types of the
	// package its results name.
	returns map[string][]string
}

type hostExport struct {
	name, kind, where string
	pos               token.Pos
}

// exportedDecls lists the exported package-level funcs, types, vars and
// consts of f (not methods).
func exportedDecls(f *ast.File) []hostExport {
	var out []hostExport
	add := func(id *ast.Ident, kind string) {
		if id.IsExported() {
			out = append(out, hostExport{name: id.Name, kind: kind, pos: id.Pos()})
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				add(d.Name, "func")
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					add(s.Name, "type")
				case *ast.ValueSpec:
					for _, id := range s.Names {
						add(id, d.Tok.String())
					}
				}
			}
		}
	}
	return out
}

// exportedFuncs lists the exported package-level functions of f.
func exportedFuncs(f *ast.File) []*ast.FuncDecl {
	var out []*ast.FuncDecl
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.IsExported() {
			out = append(out, fn)
		}
	}
	return out
}

// returnedTypes maps each of funcs to the exported types among exports
// that its results name.
func returnedTypes(funcs []*ast.FuncDecl, exports map[string]hostExport) map[string][]string {
	types := map[string]bool{}
	for name, e := range exports {
		if e.kind == "type" {
			types[name] = true
		}
	}
	out := map[string][]string{}
	for _, fn := range funcs {
		for _, id := range resultTypes(fn, types) {
			out[fn.Name.Name] = append(out[fn.Name.Name], id.Name)
		}
	}
	return out
}

// markReturnedTypes marks in used the types that used functions return
// (see TestHostExportsUsed). A type counted so lends nothing further:
// only functions' uses are followed, and they are all marked already.
func markReturnedTypes(host map[string]*hostPackage, used map[string]map[string]bool) {
	for importPath, p := range host {
		for fn, types := range p.returns {
			if !used[importPath][fn] {
				continue
			}
			for _, typ := range types {
				used[importPath][typ] = true
			}
		}
	}
}

// recordHostUses marks in used every exported name of a host package that
// f, a file of folder dir, names — leaving out the host package of dir
// itself.
func recordHostUses(f *ast.File, dir string, host map[string]*hostPackage, used map[string]map[string]bool) {
	named := map[string]*hostPackage{} // local name → package
	var dotted []*hostPackage
	for _, imp := range f.Imports {
		importPath, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		p := host[importPath]
		if p == nil || p.dir == dir {
			continue
		}
		switch {
		case imp.Name == nil:
			named[p.name] = p
		case imp.Name.Name == ".":
			dotted = append(dotted, p)
		case imp.Name.Name != "_":
			named[imp.Name.Name] = p
		}
	}
	if len(named) == 0 && len(dotted) == 0 {
		return
	}
	mark := func(p *hostPackage, name string) {
		if _, ok := p.exports[name]; !ok {
			return
		}
		if used[p.importPath] == nil {
			used[p.importPath] = map[string]bool{}
		}
		used[p.importPath][name] = true
	}
	selected := map[*ast.Ident]bool{} // the Sel of selector expressions
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			selected[n.Sel] = true
			// A package name is never resolved by the parser; an
			// identifier it resolved is a local declaration shadowing
			// the import.
			if x, ok := n.X.(*ast.Ident); ok && x.Obj == nil {
				if p := named[x.Name]; p != nil {
					mark(p, n.Sel.Name)
				}
			}
		case *ast.Ident:
			if len(dotted) > 0 && !selected[n] && n.Obj == nil {
				for _, p := range dotted {
					mark(p, n.Name)
				}
			}
		}
		return true
	})
}

// rootModuleGoFiles lists the .go files of the root module, as folder
// (slash-separated, relative to root) → file names. Like the go command it
// skips testdata and folders and files whose names begin with "." or "_";
// it also skips folders with their own go.mod (nested modules).
func rootModuleGoFiles(t *testing.T, root string) map[string][]string {
	t.Helper()
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p == root {
				return nil
			}
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dirs[rel] = append(dirs[rel], name)
		return nil
	})
	if err != nil {
		t.Fatalf("listing the root module's Go files: %v", err)
	}
	return dirs
}

// rootModulePath reads the module path from root/go.mod.
func rootModulePath(t *testing.T, root string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatalf("%s/go.mod has no module line (%v)", root, s.Err())
	return ""
}
