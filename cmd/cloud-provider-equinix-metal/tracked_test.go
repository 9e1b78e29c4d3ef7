package main

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes is the largest file the repository may track. Everything
// the project needs that is larger is built (bin/, the caches) or lives in
// ../shared/fixtures; a larger tracked file has so far only ever been a
// stray build output, which every clone then downloads.
const maxTrackedBytes = 1 << 20

// TestNoLargeTrackedFile fails on any tracked file over 1 MiB.
func TestNoLargeTrackedFile(t *testing.T) {
	root := repoRootDir(t)
	for _, f := range gitLines(t, root, "ls-files", "-z") {
		fi, err := os.Lstat(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		if fi.Mode().IsRegular() && fi.Size() > maxTrackedBytes {
			t.Errorf("%s is tracked and %.1f MiB (the limit is 1 MiB): if it is a build output, `git rm --cached %s` and add it to .gitignore; large test data belongs in ../shared/fixtures", f, float64(fi.Size())/(1<<20), f)
		}
	}
}

// TestBareBuildOutputsIgnored: `go build ./some/main` at the root leaves a
// binary named after the package's folder there; each such name must be
// ignored, so that `git add .` cannot commit one again.
func TestBareBuildOutputsIgnored(t *testing.T) {
	root := repoRootDir(t)
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		name := path.Base(pkg)
		check := exec.Command("git", "check-ignore", "-q", "--no-index", name)
		check.Dir = root
		if err := check.Run(); err != nil {
			t.Errorf("a bare `go build` of %s leaves ./%s at the root, which .gitignore does not ignore: add the line /%s to .gitignore", pkg, name, name)
		}
	}
}

func repoRootDir(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// gitLines runs git in dir and splits its NUL- or newline-separated output.
func gitLines(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s (the repository's tests run in a git checkout): %v", strings.Join(args, " "), err)
	}
	sep := []byte("\n")
	if bytes.IndexByte(out, 0) >= 0 {
		sep = []byte{0}
	}
	var lines []string
	for _, l := range bytes.Split(out, sep) {
		if len(l) > 0 {
			lines = append(lines, string(l))
		}
	}
	return lines
}
