package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a product function may be. Past it a
// function does several jobs that want names of their own; every product
// function is under it today, and this keeps it so. The SDK and the
// built-in modules count as product: the SDK is linked into the binary
// and into every module, and the built-ins are embedded in it (their test
// helpers, sdk/sdktest and modules/internal/golden, are held to it too).
const maxFuncLines = 80

// TestProductFunctionsShort fails on a function or method of host/, cmd/,
// sdk/ or modules/ longer than maxFuncLines, counting its signature and
// closing brace. Test files and testdata folders (the test fixtures, such
// as sdk/wasmhost's hostile module, which the go tool does not build as
// packages either) are left out.
func TestProductFunctionsShort(t *testing.T) {
	root := repoRootDir(t)
	fset := token.NewFileSet()
	for _, top := range []string{"host", "cmd", "sdk", "modules"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
				if n := end.Line - start.Line + 1; n > maxFuncLines {
					rel, _ := filepath.Rel(root, p)
					t.Errorf("%s:%d: %s is %d lines (at most %d): split it into steps with names of their own", rel, start.Line, fd.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
