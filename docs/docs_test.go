// Package docs holds the user documentation; its tests keep metrics.md and
// events.md true to the code: the metrics table is generated from the
// metric definitions (go test ./docs -update rewrites it), and the Event
// reasons the code can emit must be exactly those events.md lists; and
// links_test.go keeps every relative link of the repository's Markdown
// pointing at a file and heading that exist.
package docs

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated part of metrics.md")

// sourceRoots are the product code directories (test machinery excluded).
var sourceRoots = []string{"../host", "../cmd/cloud-provider-equinix-metal"}

type pkgFiles struct {
	files  []*ast.File
	consts map[string]string
}

// parsePackages parses every non-test Go file outside test, by directory.
func parsePackages(t *testing.T) map[string]*pkgFiles {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string]*pkgFiles{}
	for _, root := range sourceRoots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testing" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			dir := filepath.Dir(p)
			if pkgs[dir] == nil {
				pkgs[dir] = &pkgFiles{consts: map[string]string{}}
			}
			pkgs[dir].files = append(pkgs[dir].files, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringOf(vs.Values[i], nil); ok {
								pkg.consts[n.Name] = s
							}
						}
					}
				}
			}
		}
	}
	return pkgs
}

// stringOf evaluates a string literal, a constant of the package, or a
// concatenation of those.
func stringOf(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, ok1 := stringOf(e.X, consts)
			b, ok2 := stringOf(e.Y, consts)
			return a + b, ok1 && ok2
		}
	case *ast.ParenExpr:
		return stringOf(e.X, consts)
	}
	return "", false
}

type metric struct{ name, kind, labels, help string }

// codeMetrics finds every metrics.New<Kind>[Vec](&metrics.<Kind>Opts{...}, labels) call.
func codeMetrics(t *testing.T, pkgs map[string]*pkgFiles) []metric {
	var out []metric
	for dir, pkg := range pkgs {
		for _, f := range pkg.files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !strings.HasPrefix(sel.Sel.Name, "New") || len(call.Args) == 0 {
					return true
				}
				u, ok := call.Args[0].(*ast.UnaryExpr)
				if !ok {
					return true
				}
				lit, ok := u.X.(*ast.CompositeLit)
				if !ok {
					return true
				}
				typ, ok := lit.Type.(*ast.SelectorExpr)
				if !ok || !strings.HasSuffix(typ.Sel.Name, "Opts") || typ.Sel.Name == "TypedRateLimitingQueueConfig" {
					return true
				}
				m := metric{kind: strings.ToLower(strings.TrimSuffix(typ.Sel.Name, "Opts"))}
				var parts [3]string
				for _, el := range lit.Elts {
					kv := el.(*ast.KeyValueExpr)
					key := kv.Key.(*ast.Ident).Name
					idx := map[string]int{"Namespace": 0, "Subsystem": 1, "Name": 2}
					if i, ok := idx[key]; ok || key == "Help" {
						s, ok := stringOf(kv.Value, pkg.consts)
						if !ok {
							t.Errorf("%s: metric option %s is not a constant string", dir, key)
						}
						if key == "Help" {
							m.help = s
						} else {
							parts[i] = s
						}
					}
				}
				var names []string
				for _, p := range parts {
					if p != "" {
						names = append(names, p)
					}
				}
				m.name = strings.Join(names, "_")
				if len(call.Args) > 1 {
					labels, ok := call.Args[1].(*ast.CompositeLit)
					if !ok {
						t.Errorf("%s: labels of %s are not a []string literal", dir, m.name)
						return true
					}
					var ls []string
					for _, l := range labels.Elts {
						s, ok := stringOf(l, pkg.consts)
						if !ok {
							t.Errorf("%s: a label of %s is not a constant", dir, m.name)
						}
						ls = append(ls, "`"+s+"`")
					}
					m.labels = strings.Join(ls, ", ")
				}
				out = append(out, m)
				return true
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

const (
	beginGenerated = "<!-- BEGIN generated by docs/docs_test.go: go test ./docs -update -->\n"
	endGenerated   = "<!-- END generated -->\n"
)

// TestMetricsDoc: metrics.md's table is the metrics the code defines.
func TestMetricsDoc(t *testing.T) {
	ms := codeMetrics(t, parsePackages(t))
	if len(ms) < 20 {
		t.Fatalf("found only %d metrics in the code; the scanner is broken", len(ms))
	}
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n")
	for _, m := range ms {
		labels := m.labels
		if labels == "" {
			labels = "—"
		}
		b.WriteString("| `" + m.name + "` | " + m.kind + " | " + labels + " | " + strings.ReplaceAll(m.help, "|", "\\|") + " |\n")
	}
	doc, err := os.ReadFile("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), beginGenerated)
	_, after, ok2 := strings.Cut(rest, endGenerated)
	if !ok1 || !ok2 {
		t.Fatalf("metrics.md lacks the generated-section markers %q ... %q", beginGenerated, endGenerated)
	}
	want := before + beginGenerated + b.String() + endGenerated + after
	if want == string(doc) {
		return
	}
	if *update {
		if err := os.WriteFile("metrics.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/metrics.md differs from the metrics in the code; run: go test ./docs -update")
}

var camel = regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)

// codeEventReasons: the reason argument of every call that also passes
// v1.EventTypeNormal or v1.EventTypeWarning (recorder.Eventf and the
// packages' own event helpers), plus every reason constant (Reason… or
// reason…, exported or not, and …Reason).
func codeEventReasons(t *testing.T, pkgs map[string]*pkgFiles) []string {
	seen := map[string]bool{}
	for dir, pkg := range pkgs {
		for name, v := range pkg.consts {
			if (strings.HasPrefix(name, "Reason") || strings.HasPrefix(name, "reason") || strings.HasSuffix(name, "Reason")) && camel.MatchString(v) {
				seen[v] = true
			}
		}
		for _, f := range pkg.files {
			var params []string
			ast.Inspect(f, func(n ast.Node) bool {
				if fd, ok := n.(*ast.FuncDecl); ok {
					params = nil
					for _, fl := range fd.Type.Params.List {
						for _, nm := range fl.Names {
							params = append(params, nm.Name)
						}
					}
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				for i, a := range call.Args {
					sel, ok := a.(*ast.SelectorExpr)
					if !ok || (sel.Sel.Name != "EventTypeNormal" && sel.Sel.Name != "EventTypeWarning") || i+1 >= len(call.Args) {
						continue
					}
					r := call.Args[i+1]
					if s, ok := stringOf(r, pkg.consts); ok {
						seen[s] = true
					} else if id, ok := r.(*ast.Ident); !ok || !slices.Contains(params, id.Name) {
						t.Errorf("%s: an Event reason this test cannot resolve: %#v", dir, r)
					}
				}
				return true
			})
		}
	}
	var out []string
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

var docReason = regexp.MustCompile("(?m)^\\| `([A-Za-z0-9]+)` \\|")

// TestEventsDoc: events.md lists exactly the Event reasons of the code
// (its section on the standard controllers' events is not checked here).
func TestEventsDoc(t *testing.T) {
	code := codeEventReasons(t, parsePackages(t))
	if len(code) < 10 {
		t.Fatalf("found only %d Event reasons; the scanner is broken", len(code))
	}
	b, err := os.ReadFile("events.md")
	if err != nil {
		t.Fatal(err)
	}
	ours, _, _ := strings.Cut(string(b), "\n## Events of the standard controllers")
	var doc []string
	for _, m := range docReason.FindAllStringSubmatch(ours, -1) {
		doc = append(doc, m[1])
	}
	sort.Strings(doc)
	for _, r := range code {
		if !slices.Contains(doc, r) {
			t.Errorf("Event reason %s is emitted by the code but not in docs/events.md", r)
		}
	}
	for _, r := range doc {
		if !slices.Contains(code, r) {
			t.Errorf("docs/events.md lists %s, which the code no longer emits", r)
		}
	}
}
