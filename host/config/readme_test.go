package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// reference is the page that lists every option: its table is the one the
// warnings of load.go send a user to.
const reference = "../../docs/reference/configuration.md"

// TestReferenceListsEveryOption keeps the configuration reference's table
// true: every option has a row naming its cloud-config field, its
// environment variable and its flag.
func TestReferenceListsEveryOption(t *testing.T) {
	b, err := os.ReadFile(reference)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, o := range options {
		for _, want := range []string{"`" + o.key + "`", "`" + o.env + "`"} {
			if !strings.Contains(doc, want) {
				t.Errorf("%s does not mention %s (option %s)", reference, want, o.key)
			}
		}
		if o.flag != "" && !strings.Contains(doc, "`--"+o.flag+"`") {
			t.Errorf("%s does not mention --%s", reference, o.flag)
		}
		if o.flag != "" && o.secret {
			t.Errorf("secret option %s has a flag", o.key)
		}
		if row := tableRow(doc, "`"+o.env+"`"); row == "" || !strings.Contains(row, "`"+o.key+"`") || (o.flag != "" && !strings.Contains(row, "`--"+o.flag+"`")) {
			t.Errorf("%s has no table row naming %s, %s and its flag together", reference, o.key, o.env)
		}
	}
}

// tableRow is the first Markdown table row of doc that contains s.
func tableRow(doc, s string) string {
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "|") && strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

var (
	// A name that ends in - or _ is a prefix (`--metal-annotation-…`).
	docFlag = regexp.MustCompile(`--metal-[a-z0-9-]+`)
	docEnv  = regexp.MustCompile(`\bMETAL_[A-Z0-9_]+`)
)

// docNames are the flags (without --) or variables re finds in line.
func docNames(re *regexp.Regexp, line string) []string {
	var out []string
	for _, n := range re.FindAllString(line, -1) {
		if !strings.HasSuffix(n, "-") && !strings.HasSuffix(n, "_") {
			out = append(out, strings.TrimPrefix(n, "--"))
		}
	}
	return out
}

// TestDocsNameOnlyRealOptions: every --metal-… flag and METAL_… variable the
// README and docs/ name is one the CCM reads (or one of upstream's that it
// warns about), and a table row that names an option's flag or variable
// (the README's short table, the reference's full one) gives that option's
// own field, variable and flag.
func TestDocsNameOnlyRealOptions(t *testing.T) {
	flags, envs := map[string]*option{}, map[string]*option{}
	for i := range options {
		o := &options[i]
		if o.flag != "" {
			flags[o.flag] = o
		}
		envs[o.env] = o
	}
	files := []string{"../../README.md"}
	err := filepath.WalkDir("../../docs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %v; the walk is broken", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, fl := range docNames(docFlag, line) {
				if flags[fl] == nil {
					t.Errorf("%s:%d names --%s, which is no flag of the CCM", f, i+1, fl)
				}
			}
			for _, env := range docNames(docEnv, line) {
				if envs[env] == nil && !ignoredEnv[env] {
					t.Errorf("%s:%d names %s, which the CCM does not read", f, i+1, env)
				}
			}
			if !strings.HasPrefix(line, "|") {
				continue
			}
			for _, env := range docNames(docEnv, line) {
				o := envs[env]
				if o == nil {
					continue
				}
				if !strings.Contains(line, "`"+o.key+"`") || (o.flag != "" && !strings.Contains(line, "`--"+o.flag+"`")) {
					t.Errorf("%s:%d: the row of %s does not name its field %s and its flag --%s", f, i+1, env, o.key, o.flag)
				}
			}
		}
	}
}
