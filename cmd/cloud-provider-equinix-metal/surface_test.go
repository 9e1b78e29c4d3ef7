package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The product's surface as `go doc` shows it: what its comments name must
// be something a reader can look up. The check parses files only
// (go/parser), like TestHostExportsUsed.

// productDirs are the folders whose surface is checked: the CCM's own
// packages (host/ and this command).
func productDirs(dir string) bool {
	return dir == "host" || strings.HasPrefix(dir, "host/") || strings.HasPrefix(dir, "cmd/")
}

// declaredNames is what one folder's non-test files declare: package-level
// names, and "Type.Member" for methods and struct fields.
type declaredNames struct {
	pkg      string // the declared package name
	names    map[string]bool
	types    map[string]bool
	members  map[string]bool
	comments []*ast.CommentGroup
	where    map[*ast.CommentGroup]string
}

// parseModules reads every package of the root module and of the SDK (its
// own module, under sdk/): folder → what it declares and its comments.
func parseModules(t *testing.T) map[string]*declaredNames {
	t.Helper()
	root := repoRootDir(t)
	fset := token.NewFileSet()
	out := map[string]*declaredNames{}
	dirs := rootModuleGoFiles(t, root)
	for dir, files := range rootModuleGoFiles(t, filepath.Join(root, "sdk")) {
		dirs[path.Join("sdk", dir)] = files
	}
	for dir, files := range dirs {
		d := &declaredNames{names: map[string]bool{}, types: map[string]bool{}, members: map[string]bool{}, where: map[*ast.CommentGroup]string{}}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(root, dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			d.pkg = f.Name.Name
			d.collect(f)
			for _, c := range f.Comments {
				d.comments = append(d.comments, c)
				d.where[c] = path.Join(dir, name) + ":" + strconv.Itoa(fset.Position(c.Pos()).Line)
			}
		}
		if d.pkg != "" {
			out[dir] = d
		}
	}
	return out
}

func (d *declaredNames) collect(f *ast.File) {
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv == nil {
				d.names[decl.Name.Name] = true
				continue
			}
			if recv := receiverType(decl.Recv.List[0].Type); recv != "" {
				d.members[recv+"."+decl.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range decl.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					d.names[s.Name.Name], d.types[s.Name.Name] = true, true
					d.collectMembers(s)
				case *ast.ValueSpec:
					for _, id := range s.Names {
						d.names[id.Name] = true
					}
				}
			}
		}
	}
}

// collectMembers records a struct's fields (embedded ones by type name)
// and an interface's methods.
func (d *declaredNames) collectMembers(s *ast.TypeSpec) {
	var fields *ast.FieldList
	switch typ := s.Type.(type) {
	case *ast.StructType:
		fields = typ.Fields
	case *ast.InterfaceType:
		fields = typ.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, id := range f.Names {
			d.members[s.Name.Name+"."+id.Name] = true
		}
		if len(f.Names) == 0 {
			if name := receiverType(f.Type); name != "" {
				d.members[s.Name.Name+"."+name] = true
			}
		}
	}
}

// receiverType is the type name of a receiver or embedded field: T, *T,
// T[P], pkg.T (as T).
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// Identifier references in prose: pkg.Name (pkg a product package's name),
// Type.Member, and *Type.
var (
	qualifiedRef = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9]*)\b`)
	memberRef    = regexp.MustCompile(`\b([A-Z][A-Za-z0-9]*)\.([A-Z][A-Za-z0-9]*)\b`)
	exportedWord = regexp.MustCompile(`\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b`)
	pointerRef   = regexp.MustCompile("(?:^|[\\s(`])\\*([A-Z][A-Za-z0-9]*)\\b")
)

// TestCommentsNameRealIdentifiers fails on a comment in a product package,
// or a code span in ARCHITECTURE.md, that names a Go identifier of this
// repository that does not exist: pkg.Name where pkg is one of the product
// packages, Type.Member where Type is a type the package (for
// ARCHITECTURE.md: any product package) declares, and *Type. Such names
// are left behind by a rename or a move, and send a reader to look for
// what is not there.
func TestCommentsNameRealIdentifiers(t *testing.T) {
	pkgs := parseModules(t)
	byName := map[string][]*declaredNames{} // product package name → folders
	allTypes := map[string]bool{}           // every type of both modules
	productTypes := map[string]bool{}       // the product packages' types
	for dir, d := range pkgs {
		for typ := range d.types {
			allTypes[typ] = true
		}
		if productDirs(dir) {
			byName[d.pkg] = append(byName[d.pkg], d)
			for typ := range d.types {
				productTypes[typ] = true
			}
		}
	}
	all := make([]*declaredNames, 0, len(pkgs))
	for _, d := range pkgs {
		all = append(all, d)
	}
	for _, dir := range sortedKeys(pkgs) {
		if !productDirs(dir) {
			continue
		}
		d := pkgs[dir]
		for _, c := range d.comments {
			for _, problem := range staleRefs(c.Text(), d, all, byName, allTypes, productTypes) {
				t.Errorf("%s: comment names %s", d.where[c], problem)
			}
		}
	}
	arch, err := os.ReadFile(filepath.Join(repoRootDir(t), "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(arch), "\n") {
		for _, span := range codeSpan.FindAllStringSubmatch(line, -1) {
			for _, problem := range staleRefs(span[1], nil, all, byName, allTypes, productTypes) {
				t.Errorf("ARCHITECTURE.md:%d: `%s` names %s", i+1, span[1], problem)
			}
		}
	}
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// staleRefs lists the references in text that resolve to nothing. self is
// the package the text belongs to (nil for ARCHITECTURE.md); all is every
// package of both modules.
func staleRefs(text string, self *declaredNames, all []*declaredNames, byName map[string][]*declaredNames, allTypes, productTypes map[string]bool) []string {
	var out []string
	for _, m := range qualifiedRef.FindAllStringSubmatch(text, -1) {
		if cands, ok := byName[m[1]]; ok && !declares(cands, m[2]) {
			out = append(out, m[0]+", which package "+m[1]+" does not declare")
		}
	}
	for _, m := range memberRef.FindAllStringSubmatch(text, -1) {
		if owners := typeOwners(all, m[1]); len(owners) > 0 && !hasMember(owners, m[1], m[2]) {
			out = append(out, m[0]+", but "+m[1]+" has no "+m[2])
		} else if len(owners) == 0 && self == nil {
			out = append(out, m[0]+", but no package declares "+m[1])
		}
	}
	if self != nil {
		// A name unexported since the comment was written.
		// Not another package's (record.EventRecorder), nor a method or
		// field of this one's (a Type.Name member).
		for _, loc := range exportedWord.FindAllStringIndex(text, -1) {
			w := text[loc[0]:loc[1]]
			if loc[0] > 0 && text[loc[0]-1] == '.' || self.hasMemberNamed(w) {
				continue
			}
			if lower := strings.ToLower(w[:1]) + w[1:]; !self.names[w] && self.names[lower] {
				out = append(out, w+", which "+self.pkg+" now calls "+lower)
			}
		}
	}
	for _, m := range pointerRef.FindAllStringSubmatch(text, -1) {
		if !productTypes[m[1]] && looksLocal(m[1]) {
			out = append(out, "*"+m[1]+", a type no product package declares")
		}
	}
	if self == nil && localIdent.MatchString(text) && !allTypes[text] && !declares(all, text) && !externalNames[text] {
		out = append(out, text+", which no package here declares")
	}
	return out
}

// localIdent is a code span of ARCHITECTURE.md that is one identifier
// ending like this repository's own report and error types.
// externalNames are such identifiers that ARCHITECTURE.md names from other
// modules.
var externalNames = map[string]bool{
	"RetryError": true, // k8s.io/cloud-provider/api
}

var localIdent = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*(Error|Report|Result|Tags|Plan)$`)

func (d *declaredNames) hasMemberNamed(name string) bool {
	for m := range d.members {
		if strings.HasSuffix(m, "."+name) {
			return true
		}
	}
	return false
}

func declares(ds []*declaredNames, name string) bool {
	for _, d := range ds {
		if d.names[name] {
			return true
		}
	}
	return false
}

func typeOwners(ds []*declaredNames, typ string) []*declaredNames {
	var out []*declaredNames
	for _, d := range ds {
		if d != nil && d.types[typ] {
			out = append(out, d)
		}
	}
	return out
}

func hasMember(ds []*declaredNames, typ, member string) bool {
	for _, d := range ds {
		if d.members[typ+"."+member] {
			return true
		}
	}
	return false
}

// looksLocal: a *Type in prose that ends like this repository's own error
// and report types (the kinds renames leave behind), not a Kubernetes or
// Equinix type named without its package.
func looksLocal(name string) bool {
	for _, suffix := range []string{"Error", "Report", "Result", "Tags", "Plan"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// TestHostPackagesPromiseNothing fails on a package under host/ whose doc
// comment does not say that its API carries no compatibility promise
// outside this repository: host/ is importable (it is not internal/, by
// design, beside cmd, sdk, modules and policies), so the doc is where a
// reader learns not to build on it, as with Kubernetes' pkg/.
func TestHostPackagesPromiseNothing(t *testing.T) {
	root := repoRootDir(t)
	fset := token.NewFileSet()
	dirs := rootModuleGoFiles(t, root)
	for _, dir := range sortedKeys(dirs) {
		if dir != "host" && !strings.HasPrefix(dir, "host/") {
			continue
		}
		var doc strings.Builder
		for _, name := range dirs[dir] {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(root, dir, name), nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			if f.Doc != nil {
				doc.WriteString(f.Doc.Text())
			}
		}
		if !strings.Contains(strings.Join(strings.Fields(doc.String()), " "), "carries no compatibility promise") {
			t.Errorf("%s: the package doc does not say its API carries no compatibility promise outside this repository; end it with the sentence the other host/ packages have", dir)
		}
	}
}

// TestExportedFuncsReturnExportedTypes fails on an exported function of a
// package under host/, or an exported method of one of its exported types,
// whose results name a type the package declares but does not export — as
// the type itself, or what a pointer points to, or the element of a slice,
// array, map or channel. `go doc` shows the function, and the reader cannot
// look up what it returns: `go doc provider.cloud` finds nothing. Export the
// type (with a doc comment saying why it exists), or return an exported
// interface. Methods of unexported types are not in `go doc` and are left out,
// as are parameters and test files.
func TestExportedFuncsReturnExportedTypes(t *testing.T) {
	root := repoRootDir(t)
	fset := token.NewFileSet()
	dirs := rootModuleGoFiles(t, root)
	checked := 0
	for _, dir := range sortedKeys(dirs) {
		if dir != "host" && !strings.HasPrefix(dir, "host/") {
			continue
		}
		files := map[string]*ast.File{}
		types := map[string]bool{} // every type the package declares
		for _, name := range dirs[dir] {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(root, dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = f
			for name := range declaredTypes(f) {
				types[name] = true
			}
		}
		for _, name := range sortedKeys(files) {
			f := files[name]
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || !fn.Name.IsExported() || !exportedReceiver(fn) {
					continue
				}
				checked++
				for _, typ := range resultTypes(fn, types) {
					if ast.IsExported(typ.Name) {
						continue
					}
					t.Errorf("%s:%d: %s.%s returns %s, which package %s does not export, so `go doc` shows the reader a type they cannot look up: export %s (with a doc comment saying why it exists), or return an exported interface",
						path.Join(dir, name), fset.Position(typ.Pos()).Line, f.Name.Name, funcName(fn), typ.Name, f.Name.Name, typ.Name)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no exported function under host/")
	}
}

// declaredTypes is the package-level types f declares.
func declaredTypes(f *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, decl := range f.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
			for _, s := range g.Specs {
				out[s.(*ast.TypeSpec).Name.Name] = true
			}
		}
	}
	return out
}

// exportedReceiver: fn is a function, or a method of an exported type.
func exportedReceiver(fn *ast.FuncDecl) bool {
	return fn.Recv == nil || ast.IsExported(receiverType(fn.Recv.List[0].Type))
}

// funcName is F for a function and T.M for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil {
		return fn.Name.Name
	}
	return receiverType(fn.Recv.List[0].Type) + "." + fn.Name.Name
}

// resultTypes lists where fn's results name one of types, the package's
// own types (exported or not): a result's type itself, or the type a
// pointer, slice, array, map, channel, function type or type argument in
// it holds. Other packages' types (pkg.T), builtins and fn's type
// parameters are not the package's and are left out.
func resultTypes(fn *ast.FuncDecl, types map[string]bool) []*ast.Ident {
	if fn.Type.Results == nil {
		return nil
	}
	params := map[string]bool{}
	for _, list := range []*ast.FieldList{fn.Type.TypeParams, receiverTypeParams(fn)} {
		if list != nil {
			for _, f := range list.List {
				for _, id := range f.Names {
					params[id.Name] = true
				}
			}
		}
	}
	var out []*ast.Ident
	for _, r := range fn.Type.Results.List {
		typeIdents(r.Type, func(id *ast.Ident) {
			if types[id.Name] && !params[id.Name] {
				out = append(out, id)
			}
		})
	}
	return out
}

// receiverTypeParams is the type parameters a generic method's receiver
// names (the P of func (x *T[P]) M()), as a field list; nil otherwise.
func receiverTypeParams(fn *ast.FuncDecl) *ast.FieldList {
	if fn.Recv == nil {
		return nil
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	var idents []ast.Expr
	switch r := recv.(type) {
	case *ast.IndexExpr:
		idents = []ast.Expr{r.Index}
	case *ast.IndexListExpr:
		idents = r.Indices
	}
	list := &ast.FieldList{}
	for _, e := range idents {
		if id, ok := e.(*ast.Ident); ok {
			list.List = append(list.List, &ast.Field{Names: []*ast.Ident{id}})
		}
	}
	return list
}

// typeIdents calls yield for each unqualified type name in the type
// expression e (not the field names of a func or struct type in it, nor
// anything of another package).
func typeIdents(e ast.Expr, yield func(*ast.Ident)) {
	fields := func(l *ast.FieldList) {
		if l != nil {
			for _, f := range l.List {
				typeIdents(f.Type, yield)
			}
		}
	}
	switch e := e.(type) {
	case *ast.Ident:
		yield(e)
	case *ast.ParenExpr:
		typeIdents(e.X, yield)
	case *ast.StarExpr:
		typeIdents(e.X, yield)
	case *ast.Ellipsis:
		typeIdents(e.Elt, yield)
	case *ast.ArrayType:
		typeIdents(e.Elt, yield)
	case *ast.MapType:
		typeIdents(e.Key, yield)
		typeIdents(e.Value, yield)
	case *ast.ChanType:
		typeIdents(e.Value, yield)
	case *ast.IndexExpr:
		typeIdents(e.X, yield)
		typeIdents(e.Index, yield)
	case *ast.IndexListExpr:
		typeIdents(e.X, yield)
		for _, x := range e.Indices {
			typeIdents(x, yield)
		}
	case *ast.FuncType:
		fields(e.Params)
		fields(e.Results)
	case *ast.StructType:
		fields(e.Fields)
	case *ast.InterfaceType:
		fields(e.Methods)
	}
}
