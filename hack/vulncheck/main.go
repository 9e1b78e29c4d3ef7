// Command vulncheck runs govulncheck offline and decides what fails the
// build (make lint).
//
// govulncheck reads its database from a directory (-db), built by x/vulndb's
// indexdb from the OSV files of the golang.org/x/vulndb module the Go module
// proxy serves: no network beyond the proxy. Its JSON findings are sorted
// here into two kinds:
//
//   - a vulnerable symbol of a module this project requires that its code
//     calls: the fix is a dependency bump in go.mod, so it fails;
//   - a vulnerable symbol of the standard library: the fix is a newer Go
//     than the one building, which the project cannot install here (the
//     machine has one Go). It is listed with the Go version that fixes it,
//     and does not fail; RELEASING.md says to build releases with that Go.
//
// Findings in modules whose vulnerable code is not called are not reported
// (govulncheck's own default).
//
//	vulncheck -govulncheck BIN -db DIR [packages]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

// finding is the part of a govulncheck JSON finding read here.
type finding struct {
	OSV          string `json:"osv"`
	FixedVersion string `json:"fixed_version"`
	Trace        []struct {
		Module   string `json:"module"`
		Version  string `json:"version"`
		Package  string `json:"package"`
		Function string `json:"function"`
	} `json:"trace"`
}

// vuln is one vulnerability the code calls.
type vuln struct {
	id, module, version, fixed, symbol string
}

func main() {
	bin := flag.String("govulncheck", "govulncheck", "the govulncheck binary")
	db := flag.String("db", "", "the vulnerability database directory (x/vulndb's indexdb output)")
	flag.Parse()
	if *db == "" {
		fmt.Fprintln(os.Stderr, "vulncheck: -db is required")
		os.Exit(2)
	}
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(*bin, append([]string{"-db", "file://" + *db, "-format", "json"}, pkgs...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "vulncheck: %s: %v\n%s", *bin, err, stderr.String())
		os.Exit(2)
	}
	called, err := calledVulns(&out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vulncheck: reading govulncheck's output: %v\n", err)
		os.Exit(2)
	}
	os.Exit(report(os.Stdout, called))
}

// calledVulns reads govulncheck's JSON stream and keeps each vulnerability
// whose symbol the code calls (a trace whose first frame names a function),
// once per ID and module.
func calledVulns(r io.Reader) ([]vuln, error) {
	dec := json.NewDecoder(r)
	seen := map[string]bool{}
	var out []vuln
	for {
		var msg struct {
			Finding *finding `json:"finding"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		f := msg.Finding
		if f == nil || len(f.Trace) == 0 || f.Trace[0].Function == "" {
			continue
		}
		t := f.Trace[0]
		key := f.OSV + " " + t.Module
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, vuln{id: f.OSV, module: t.Module, version: t.Version, fixed: f.FixedVersion, symbol: t.Package + "." + t.Function})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

// report prints the findings and returns the exit code: 1 if a required
// module's vulnerable code is called.
func report(w io.Writer, vulns []vuln) int {
	var mods, std []vuln
	for _, v := range vulns {
		if v.module == "stdlib" {
			std = append(std, v)
		} else {
			mods = append(mods, v)
		}
	}
	for _, v := range mods {
		fmt.Fprintf(w, "FAIL %s: %s@%s, called (%s); fixed in %s: go get %s@%s\n", v.id, v.module, v.version, v.symbol, v.fixed, v.module, v.fixed)
	}
	if len(std) > 0 {
		need := ""
		var ids []string
		for _, v := range std {
			ids = append(ids, v.id)
			if need == "" || semver.Compare(need, v.fixed) < 0 {
				need = v.fixed
			}
		}
		fmt.Fprintf(w, "note: %d standard-library vulnerabilities reach the code with this Go (%s), fixed in Go %s: %s.\n"+
			"      Not failing: this machine has no newer Go; build releases with Go %s or later (RELEASING.md).\n",
			len(std), std[0].version, strings.TrimPrefix(need, "v"), strings.Join(ids, " "), strings.TrimPrefix(need, "v"))
	}
	if len(mods) > 0 {
		return 1
	}
	fmt.Fprintf(w, "vulncheck: no called vulnerability in a required module\n")
	return 0
}
