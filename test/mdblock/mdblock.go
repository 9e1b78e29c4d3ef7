// Package mdblock reads the fenced code blocks that a Markdown document
// marks for a test, so that the test runs what users read: the block right
// after a line
//
//	<!-- KEY: NAME any words -->
//
// (an HTML comment, which renders as nothing), by NAME.
package mdblock

import (
	"fmt"
	"regexp"
	"strings"
)

// Marked returns the blocks of md marked with key, by name, with the
// fence's indentation (inside a list item) removed from every line.
func Marked(md, key string) (map[string]string, error) {
	marker := regexp.MustCompile(`^\s*<!-- ` + regexp.QuoteMeta(key) + `: (\S+)(\s.*)? -->\s*$`)
	lines := strings.Split(md, "\n")
	blocks := map[string]string{}
	for i := 0; i < len(lines); i++ {
		m := marker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		name := m[1]
		if _, dup := blocks[name]; dup {
			return nil, fmt.Errorf("two blocks marked %s", name)
		}
		if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimLeft(lines[i+1], " "), "```") {
			return nil, fmt.Errorf("the marker of %s (line %d) is not followed by a fenced code block", name, i+1)
		}
		indent := lines[i+1][:len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " "))]
		var b strings.Builder
		for i += 2; ; i++ {
			if i >= len(lines) {
				return nil, fmt.Errorf("the block %s is not closed", name)
			}
			if strings.TrimSpace(lines[i]) == "```" {
				break
			}
			b.WriteString(strings.TrimPrefix(lines[i], indent) + "\n")
		}
		blocks[name] = b.String()
	}
	return blocks, nil
}
