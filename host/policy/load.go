package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/print"
	"k8s.io/klog/v2"
)

// The rules the host queries, and the queries themselves. Each query is
// always defined (comprehensions are), so "undefined" and "denied" are told
// apart in Go, where they become clear errors, instead of by an empty
// result set.
const (
	placementRule = "data.equinix.eip.placement"
	placementDeny = "data.equinix.eip.deny"
	selectionRule = "data.equinix.bgp.selected_nodes"
	selectionDeny = "data.equinix.bgp.deny"

	placementQuery = "decision := [x | x := " + placementRule + "]; deny := [x | x := " + placementDeny + "]"
	selectionQuery = "decision := [x | x := " + selectionRule + "]; deny := [x | x := " + selectionDeny + "]"
)

// required lists the rules a policy directory must define, with the
// default file a user can start from when one is missing.
var required = []struct {
	rule, file string
}{
	{placementRule, "eip.rego"},
	{selectionRule, "bgp.rego"},
}

// compiled is one loaded, compiled and prepared set of policies. It is
// immutable, so the engine swaps it atomically on reload while evaluations
// of the previous one finish undisturbed.
type compiled struct {
	source    string // "built-in" or the directory, for error messages
	digest    string // of the loaded files, to skip reloads that change nothing
	placement rego.PreparedEvalQuery
	selection rego.PreparedEvalQuery
}

// capabilitiesFile is the OPA capabilities file at the repository root that
// holds exactly these capabilities (a test keeps the two equal), so that
// `opa check --capabilities opa-capabilities.json` refuses before deploying
// what the CCM would refuse.
const capabilitiesFile = "opa-capabilities.json"

// checkHint is how the CCM's refusals say to check policies beforehand.
const checkHint = "check them with `opa check --strict --capabilities " + capabilitiesFile + " <dir>`, using " + capabilitiesFile + " from this CCM's repository, which lists the builtins the CCM allows"

// capabilities are OPA's builtins minus the non-deterministic ones
// (http.send, net.lookup_ip_addr, time.now_ns, rand.intn, uuid.rfc4122,
// opa.runtime, ...): a decision must depend only on its input and the
// policy files, so that `opa test` predicts it, it cannot leak data over
// the network, and a retry gives the same answer. A policy that calls one
// fails to compile with "undefined function".
var capabilities, removedBuiltins = func() (*ast.Capabilities, []string) {
	caps := ast.CapabilitiesForThisVersion()
	var kept []*ast.Builtin
	var removed []string
	for _, b := range caps.Builtins {
		if b.IsNondeterministic() {
			removed = append(removed, b.Name)
			continue
		}
		kept = append(kept, b)
	}
	caps.Builtins = kept
	caps.AllowNet = []string{}
	return caps, removed
}()

// sandboxHint explains an "undefined function" error that comes from the
// sandbox rather than from a typo.
func sandboxHint(msg string) string {
	for _, name := range removedBuiltins {
		if strings.Contains(msg, "undefined function "+name) {
			return "; " + name + " is not available to CCM policies: network, clock and random builtins are disabled so that a decision depends only on its input"
		}
	}
	return ""
}

// isPolicyFile says whether a file of a policy directory is loaded: Rego
// modules except tests, and JSON/YAML data (mounted under data.<subdir> as
// `opa test` does).
func isPolicyFile(name string) bool {
	switch path.Ext(name) {
	case ".rego":
		return !strings.HasSuffix(name, "_test.rego")
	case ".json", ".yaml", ".yml":
		return true
	}
	return false
}

// snapshot reads the policy files of fsys once into memory. Compiling from
// the snapshot means the digest and the policies come from the same bytes
// even if a ConfigMap update lands mid-read. Names starting with "." are
// skipped: a mounted ConfigMap holds every file twice more under
// "..data/" and "..<timestamp>/", and hidden files are editors' litter.
func snapshot(fsys fs.FS) (memFS, string, error) {
	files := memFS{}
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isPolicyFile(d.Name()) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 { // ConfigMap keys are symlinks into ..data
			info, err := fs.Stat(fsys, p)
			if errors.Is(err, fs.ErrNotExist) {
				// A removed key dangles between the kubelet's "..data"
				// swap and its cleanup; the key is gone.
				return nil
			}
			if err != nil {
				return err
			}
			if info.IsDir() {
				return nil
			}
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files[p] = data
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return files, hex.EncodeToString(h.Sum(nil)), nil
}

// compile parses, compiles and prepares the snapshot. dir is where the
// files came from ("" for the built-ins), only used in messages.
func compile(ctx context.Context, files memFS, digest, dir string) (*compiled, error) {
	source := sourceName(dir)
	if len(files) == 0 {
		return nil, fmt.Errorf("policies %s: no .rego file found; mount the policy ConfigMap there (start from the files in policies/), or unset --metal-policy-dir to use the built-in policies", source)
	}
	res, err := loader.NewFileLoader().
		WithFS(files).
		WithRegoVersion(ast.RegoV1).
		WithCapabilities(capabilities).
		WithProcessAnnotation(true).
		Filtered([]string{"."}, nil)
	if err != nil {
		return nil, fmt.Errorf("policies %s do not load: %s; fix them (%s)", source, formatErrors(err, dir), checkHint)
	}
	compiler := ast.NewCompiler().
		WithCapabilities(capabilities).
		WithEnablePrintStatements(true)
	if compiler.Compile(res.ParsedModules()); compiler.Failed() {
		msg := formatErrors(compiler.Errors, dir)
		return nil, fmt.Errorf("policies %s do not compile: %s; fix them (%s)%s", source, msg, checkHint, sandboxHint(msg))
	}
	for _, r := range required {
		if err := checkRule(compiler, r.rule, r.file, dir); err != nil {
			return nil, err
		}
	}
	store, err := res.Store()
	if err != nil {
		return nil, fmt.Errorf("policies %s: data files do not load: %s", source, oneLine(err.Error()))
	}
	prepare := func(query string) (rego.PreparedEvalQuery, error) {
		return rego.New(
			rego.Query(query),
			rego.Compiler(compiler),
			rego.Store(store),
			rego.Capabilities(capabilities),
			rego.StrictBuiltinErrors(true),
			rego.EnablePrintStatements(true),
			rego.PrintHook(printHook{source: source}),
		).PrepareForEval(ctx)
	}
	c := &compiled{source: source, digest: digest}
	if c.placement, err = prepare(placementQuery); err != nil {
		return nil, fmt.Errorf("policies %s: preparing %s failed: %s", source, placementRule, formatErrors(err, dir))
	}
	if c.selection, err = prepare(selectionQuery); err != nil {
		return nil, fmt.Errorf("policies %s: preparing %s failed: %s", source, selectionRule, formatErrors(err, dir))
	}
	return c, nil
}

// checkRule fails when the rule the host queries is missing or is a
// function: a typo in a package or rule name would otherwise only show up
// as "undefined" on the first Service.
func checkRule(c *ast.Compiler, rule, file, dir string) error {
	source := sourceName(dir)
	ref := ast.MustParseRef(rule)
	rules := c.GetRules(ref)
	pkg, name := ref[:len(ref)-1], ref[len(ref)-1].Value.(ast.String)
	if len(rules) == 0 {
		return fmt.Errorf("policies %s define no rule %s (rule %s in package %s); add it, for example from the default policies/%s",
			source, rule, string(name), strings.TrimPrefix(pkg.String(), "data."), file)
	}
	for _, r := range rules {
		if len(r.Head.Args) > 0 {
			return fmt.Errorf("policies %s: %s at %s is a function; make it a rule without arguments that reads input",
				source, rule, position(r.Location, dir))
		}
	}
	return nil
}

func sourceName(dir string) string {
	if dir == "" {
		return "built-in"
	}
	return "in " + dir
}

// formatErrors turns OPA's (often multi-line) error lists into one line:
// "file:row: message" for up to three errors, with paths under dir.
func formatErrors(err error, dir string) string {
	var list []error
	var astErrs ast.Errors
	var loadErrs loader.Errors
	switch {
	case errors.As(err, &astErrs):
		for _, e := range astErrs {
			list = append(list, e)
		}
	case errors.As(err, &loadErrs):
		list = loadErrs
	default:
		list = []error{err}
	}
	var parts []string
	seen := map[string]bool{} // the parser may report one error twice
	for _, e := range list {
		var msg string
		var ae *ast.Error
		var te *topdown.Error
		switch {
		case errors.As(e, &ae):
			msg = withLocation(ae.Location, dir, ae.Code+": "+ae.Message)
		case errors.As(e, &te):
			msg = withLocation(te.Location, dir, te.Code+": "+te.Message)
		default:
			msg = oneLine(e.Error())
		}
		if !seen[msg] {
			seen[msg] = true
			parts = append(parts, msg)
		}
	}
	if len(parts) > 3 {
		parts = append(parts[:3], fmt.Sprintf("and %d more", len(parts)-3))
	}
	return strings.Join(parts, "; ")
}

func withLocation(loc *ast.Location, dir, msg string) string {
	if loc != nil {
		msg = position(loc, dir) + ": " + msg
	}
	return oneLine(msg)
}

// position is "dir/file:row" for a policy position.
func position(loc *ast.Location, dir string) string {
	if loc == nil {
		return "?"
	}
	file := loc.File
	if dir != "" && file != "" {
		file = filepath.Join(dir, file)
	}
	return fmt.Sprintf("%s:%d", file, loc.Row)
}

// printHook sends print() output of policies to the log, so a user can
// debug a policy in the running CCM (klog -v=2).
type printHook struct{ source string }

func (h printHook) Print(pctx print.Context, msg string) error {
	klog.FromContext(pctx.Context).V(2).Info("Policy print", "policies", h.source, "location", position(pctx.Location, ""), "message", msg)
	return nil
}
