package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink is an inline Markdown link's target: ](target) or ](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

var mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// TestLinks: every relative link of the repository's Markdown (README,
// TESTING.md, docs/, the READMEs of the folders) names a file that exists,
// and a #fragment names a heading of the Markdown file it points into, as
// GitHub makes their anchors. Pages move (the README's sections went to
// docs/ and TESTING.md); this keeps every link to them following.
func TestLinks(t *testing.T) {
	root := ".."
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found only %d Markdown files; the walk is broken", len(files))
	}
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		lines, err := mdLines(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			for _, m := range mdLink.FindAllStringSubmatch(l.text, -1) {
				if err := checkLink(f, m[1], anchors); err != nil {
					rel, _ := filepath.Rel(root, f)
					t.Errorf("%s:%d: %v", rel, l.n, err)
				}
			}
		}
	}
}

type mdLine struct {
	n    int
	text string
}

// mdLines are a Markdown file's lines outside fenced code blocks.
func mdLines(path string) ([]mdLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []mdLine
	fence := false
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if !fence {
			out = append(out, mdLine{i + 1, l})
		}
	}
	return out, nil
}

func checkLink(from, target string, anchors map[string]map[string]bool) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	p, frag, _ := strings.Cut(target, "#")
	dest := from
	if p != "" {
		dest = filepath.Join(filepath.Dir(from), filepath.FromSlash(p))
		if _, err := os.Stat(dest); err != nil {
			return fmt.Errorf("link %s: no such file", target)
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return nil
	}
	if anchors[dest] == nil {
		lines, err := mdLines(dest)
		if err != nil {
			return err
		}
		anchors[dest] = map[string]bool{}
		seen := map[string]int{}
		for _, l := range lines {
			if m := mdHeading.FindStringSubmatch(l.text); m != nil {
				a := slug(m[1])
				if n := seen[a]; n > 0 {
					anchors[dest][fmt.Sprintf("%s-%d", a, n)] = true
				} else {
					anchors[dest][a] = true
				}
				seen[a]++
			}
		}
	}
	if !anchors[dest][frag] {
		return fmt.Errorf("link %s: no heading with the anchor #%s", target, frag)
	}
	return nil
}

// slug is GitHub's anchor of a heading: lower case, letters, digits, _ and
// - kept, spaces made -, anything else dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
