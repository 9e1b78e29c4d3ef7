package mdblock

import (
	"strings"
	"testing"
)

func TestMarked(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		want     map[string]string
		err      string
	}{
		{"bare marker", "<!-- k: a -->\n```sh\necho a\n```\n", map[string]string{"a": "echo a\n"}, ""},
		{"words after the name", "<!-- k: a runs this block -->\n```sh\necho a\n```\n", map[string]string{"a": "echo a\n"}, ""},
		{"indented in a list item", "- x\n  <!-- k: a -->\n  ```sh\n  echo a\n  ```\n", map[string]string{"a": "echo a\n"}, ""},
		{"another key", "<!-- other: a -->\n```sh\necho a\n```\n", map[string]string{}, ""},
		{"no block after", "<!-- k: a -->\ntext\n", nil, "not followed by a fenced code block"},
		{"not closed", "<!-- k: a -->\n```sh\necho a\n", nil, "not closed"},
		{"twice", "<!-- k: a -->\n```\n```\n<!-- k: a -->\n```\n```\n", nil, "two blocks marked a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marked(tc.md, "k")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("Marked = %q, %v; want %q", got, err, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("block %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
