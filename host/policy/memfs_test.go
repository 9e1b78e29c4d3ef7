package policy

import (
	"testing"
	"testing/fstest"
)

// memFS must behave as a file system for OPA's loader and fs.WalkDir;
// fstest.TestFS checks every fs.FS rule (Open, Stat, ReadDir, paths).
func TestMemFS(t *testing.T) {
	for name, files := range map[string]memFS{
		"flat":   {"eip.rego": []byte("package a"), "bgp.rego": []byte("package b")},
		"nested": {"eip.rego": []byte("x"), "lib/util.rego": []byte("y"), "lib/data/d.json": []byte("{}")},
		"empty":  {},
	} {
		t.Run(name, func(t *testing.T) {
			var want []string
			for p := range files {
				want = append(want, p)
			}
			if err := fstest.TestFS(files, want...); err != nil {
				t.Fatal(err)
			}
		})
	}
}
