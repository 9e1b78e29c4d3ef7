package main

import (
	"strings"
	"testing"
)

// A govulncheck JSON stream (the messages' shapes as govulncheck v1.9.0
// writes them): a called module symbol, a called standard-library symbol
// twice, an imported-but-not-called finding, and other messages.
const stream = `{"config":{"protocol_version":"v1.0.0"}}
{"progress":{"message":"Scanning your code"}}
{"osv":{"id":"GO-2026-6865"}}
{"finding":{"osv":"GO-2026-6865","fixed_version":"v1.20.2","trace":[{"module":"github.com/klauspost/compress","version":"v1.20.0","package":"github.com/klauspost/compress/zstd","function":"Decode"},{"module":"example.com/app","package":"example.com/app","function":"main"}]}}
{"finding":{"osv":"GO-2026-6617","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve"}]}}
{"finding":{"osv":"GO-2026-6617","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve"}]}}
{"finding":{"osv":"GO-2026-6809","fixed_version":"v1.26.10","trace":[{"module":"stdlib","version":"v1.26.8","package":"crypto/x509","function":"Verify"}]}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v2.0.0","trace":[{"module":"example.com/imported","version":"v1.0.0","package":"example.com/imported/pkg"}]}}
`

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		input  string
		code   int
		want   []string
		absent []string
	}{
		{name: "a called module vulnerability fails, naming the bump", input: stream, code: 1,
			want:   []string{"FAIL GO-2026-6865: github.com/klauspost/compress@v1.20.0", "go get github.com/klauspost/compress@v1.20.2", "2 standard-library vulnerabilities", "fixed in Go 1.26.10"},
			absent: []string{"GO-2026-0001", "no called vulnerability"}},
		{name: "standard library only: listed, not failing", input: strings.SplitAfterN(stream, "\n", 5)[4], code: 0,
			want: []string{"2 standard-library vulnerabilities", "GO-2026-6617 GO-2026-6809", "no called vulnerability in a required module"}},
		{name: "nothing called", input: `{"config":{}}`, code: 0, want: []string{"no called vulnerability"}, absent: []string{"standard-library"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vulns, err := calledVulns(strings.NewReader(tc.input))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if code := report(&out, vulns); code != tc.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.code, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out.String(), a) {
					t.Errorf("output has %q:\n%s", a, out.String())
				}
			}
		})
	}
}
