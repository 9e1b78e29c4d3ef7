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
