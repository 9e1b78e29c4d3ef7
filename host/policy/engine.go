// Package policy evaluates the CCM's OPA Rego policies: where a Service's
// Elastic IP is reserved (data.equinix.eip.placement) and which nodes get
// BGP (data.equinix.bgp.selected_nodes). The contract is in ARCHITECTURE.md and
// policies/README.md; the default policies are embedded from policies/.
//
// An Engine loads a policy directory (or the built-ins), checks that the
// rules it queries exist, prepares both queries once, and then evaluates
// them with a deadline, without network, clock or randomness. Watch
// reloads the directory when a mounted ConfigMap changes; a reload that
// fails keeps the previous policies. Every decision that is undefined, of
// the wrong type, fails or is denied is an error naming the rule and what
// to change: the CCM never falls back to a default location or node set.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/policies"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// Defaults of Options.
const (
	defaultTimeout      = 2 * time.Second
	defaultReloadDelay  = 500 * time.Millisecond
	defaultResyncPeriod = time.Minute
)

// Options tune an Engine; the zero value gives the defaults.
type Options struct {
	// Timeout bounds one evaluation (defaultTimeout). The defaults take
	// microseconds for a placement and milliseconds for 5,000 nodes, so it
	// only stops a runaway policy.
	Timeout time.Duration
	// ReloadDelay is how long Watch waits after a change before reloading
	// (defaultReloadDelay), so that the several events of one ConfigMap
	// update cause one reload.
	ReloadDelay time.Duration
	// ResyncPeriod is how often Watch re-reads the directory even without
	// an event (defaultResyncPeriod), in case an event was lost. A re-read
	// that finds the same files does nothing.
	ResyncPeriod time.Duration
	// OnReload, if set, is called after each reload Watch attempts that
	// found changed files: with nil when the new policies are in use, else
	// with the error (the previous policies stay in use). The CCM can turn
	// it into an Event.
	OnReload func(error)
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.ReloadDelay <= 0 {
		o.ReloadDelay = defaultReloadDelay
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = defaultResyncPeriod
	}
	return o
}

// Engine evaluates the placement and selection policies. It is safe for
// concurrent use; a reload swaps the policies between evaluations.
type Engine struct {
	dir  string
	fsys fs.FS
	opts Options

	nodes        nodeCache
	current      atomic.Pointer[compiled]
	reloadMu     sync.Mutex // one reload at a time; guards failedDigest
	failedDigest string     // of the files the last failed reload refused
	lastErr      atomic.Pointer[error]
}

// Load loads the policies of dir, or the built-in ones when dir is "" (the
// --metal-policy-dir setting). Files named *_test.rego and names starting
// with "." are skipped. It fails, with a one-line message saying what to
// fix, when the directory cannot be read, a policy does not compile (for
// example because it calls http.send), or a rule the CCM queries is
// missing.
func Load(ctx context.Context, dir string, opts Options) (*Engine, error) {
	registerMetrics()
	e := &Engine{dir: dir, opts: opts.withDefaults(), fsys: policies.FS}
	if dir != "" {
		info, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("policy directory %s cannot be read (%v); mount the policy ConfigMap there or unset --metal-policy-dir to use the built-in policies", dir, err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("policy directory %s is a file; --metal-policy-dir must name the directory where the policy ConfigMap is mounted", dir)
		}
		e.fsys = os.DirFS(dir)
	}
	c, err := e.load(ctx)
	if err != nil {
		return nil, err
	}
	e.current.Store(c)
	return e, nil
}

func (e *Engine) load(ctx context.Context) (*compiled, error) {
	files, digest, err := snapshot(e.fsys)
	if err != nil {
		return nil, fmt.Errorf("policies %s cannot be read: %s; check the mounted ConfigMap", sourceName(e.dir), oneLine(err.Error()))
	}
	return compile(ctx, files, digest, e.dir)
}

// Source says which policies are in use: "built-in" or "in <dir>".
func (e *Engine) Source() string { return e.current.Load().source }

// Digest identifies the loaded policy files (a SHA-256 over names and
// contents), for logs that say which version decided.
func (e *Engine) Digest() string { return e.current.Load().digest }

// LastReloadError is the error of the latest reload attempt, nil when it
// succeeded or none was made. While it is not nil the previous policies
// are in use.
func (e *Engine) LastReloadError() error {
	if p := e.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Reload re-reads the policy directory and, if its files changed and
// compile, uses them from the next evaluation on. On failure the previous
// policies stay in use and the error says why. changed reports whether
// there is news: other files than in use, or a return to the files in use
// after a failure. Files already refused give (false, the same error), so
// periodic resyncs do not repeat a report. The built-ins never change.
func (e *Engine) Reload(ctx context.Context) (changed bool, err error) {
	if e.dir == "" {
		return false, nil
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	files, digest, err := snapshot(e.fsys)
	if err == nil && digest == e.current.Load().digest {
		if e.LastReloadError() == nil {
			return false, nil
		}
		// The files went back to the version in use: nothing is stale.
		e.lastErr.Store(nil)
		e.failedDigest = ""
		reloadsTotal.WithLabelValues("success").Inc()
		reloadFailing.Set(0)
		return true, nil
	}
	if err == nil && digest == e.failedDigest {
		// Already refused; a resync must not report it again.
		return false, e.LastReloadError()
	}
	var c *compiled
	if err != nil {
		err = fmt.Errorf("policies %s cannot be read: %s; check the mounted ConfigMap", sourceName(e.dir), oneLine(err.Error()))
	} else {
		c, err = compile(ctx, files, digest, e.dir)
	}
	if err != nil {
		err = fmt.Errorf("reload failed, still using the previous policies: %w", err)
		e.lastErr.Store(&err)
		e.failedDigest = digest
		reloadsTotal.WithLabelValues("failure").Inc()
		reloadFailing.Set(1)
		return true, err
	}
	e.current.Store(c)
	e.lastErr.Store(nil)
	e.failedDigest = ""
	reloadsTotal.WithLabelValues("success").Inc()
	reloadFailing.Set(0)
	return true, nil
}

// Placement decides where the EIP of in.Service is reserved. The error is
// a *denyError (errors.Is errDenied) when the policy denies, else one
// matching errUndefined, ErrInvalidDecision, ErrEvaluation or ErrTimeout;
// its message is meant for an Event on the Service.
func (e *Engine) Placement(ctx context.Context, in PlacementInput) (location.Location, error) {
	c := e.current.Load()
	subject := "Service " + in.Service.Namespace + "/" + in.Service.Name
	const what = "EIP placement"
	value, err := e.eval(ctx, c, c.placement, in.value(&e.nodes), decisionPlacement, what, subject, placementDeny)
	if err != nil {
		return location.Location{}, err
	}
	p, err := placementFrom(value)
	if err != nil {
		return location.Location{}, e.fail(decisionPlacement, ErrInvalidDecision, nil,
			"%s policy (%s) gave an invalid decision for %s: %s = %s; %s", what, c.source, subject, placementRule, clip(jsonText(value), 200), err)
	}
	return p, nil
}

// SelectNodes decides, in one evaluation, which of in.Nodes get BGP. The
// errors are as for Placement; an undefined or malformed decision is an
// error, never "no nodes" or "all nodes".
func (e *Engine) SelectNodes(ctx context.Context, in SelectionInput) (sets.Set[string], error) {
	c := e.current.Load()
	const what = "BGP selection"
	subject := fmt.Sprintf("the selection of %d nodes", len(in.Nodes))
	input, known := in.value(&e.nodes)
	value, err := e.eval(ctx, c, c.selection, input, decisionSelection, what, subject, selectionDeny)
	if err != nil {
		return nil, err
	}
	names, ok := value.([]any)
	if !ok {
		return nil, e.fail(decisionSelection, ErrInvalidDecision, nil,
			"%s policy (%s) gave an invalid decision: %s = %s; it must be a set of node names (selected_nodes contains name if { ... })", what, c.source, selectionRule, clip(jsonText(value), 200))
	}
	selected := make(sets.Set[string], len(names))
	for _, v := range names {
		name, ok := v.(string)
		if _, isNode := known[name]; !ok || !isNode {
			return nil, e.fail(decisionSelection, ErrInvalidDecision, nil,
				"%s policy (%s) selected %s, which is not the name of a node in input.nodes; select only input.nodes[_].name in %s", what, c.source, clip(jsonText(v), 200), selectionRule)
		}
		selected.Insert(name)
	}
	return selected, nil
}

// eval runs a prepared query and returns the queried rule's value, or the
// error for a denial, an undefined rule, a failure or a timeout.
func (e *Engine) eval(ctx context.Context, c *compiled, pq rego.PreparedEvalQuery, input ast.Value,
	decision, what, subject, denyRule string) (any, error) {
	start := time.Now()
	defer func() { evalDuration.WithLabelValues(decision).Observe(time.Since(start).Seconds()) }()
	decisionsTotal.WithLabelValues(decision).Inc()

	if err := ctx.Err(); err != nil {
		// OPA may finish a small evaluation before it notices; a caller
		// that gave up must not get a decision it will act on.
		return nil, e.fail(decision, ErrEvaluation, err,
			"%s policy (%s) for %s was not evaluated: %v", what, c.source, subject, err)
	}
	evalCtx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	rs, err := pq.Eval(evalCtx, rego.EvalParsedInput(input))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, e.fail(decision, ErrEvaluation, ctx.Err(),
			"%s policy (%s) for %s was not evaluated: %v", what, c.source, subject, ctx.Err())
	case err != nil && evalCtx.Err() != nil:
		return nil, e.fail(decision, ErrTimeout, context.DeadlineExceeded,
			"%s policy (%s) for %s did not finish within %s; make the policy cheaper (measure it with `opa bench`)", what, c.source, subject, e.opts.Timeout)
	case err != nil:
		return nil, e.fail(decision, ErrEvaluation, err,
			"%s policy (%s) failed for %s: %s; fix the policy (test it with `opa test`)", what, c.source, subject, formatErrors(err, dirOf(c)))
	case len(rs) != 1:
		// Cannot happen: the query is a conjunction of comprehensions.
		return nil, e.fail(decision, ErrEvaluation, nil, "%s policy (%s) for %s gave %d results instead of 1", what, c.source, subject, len(rs))
	}
	bindings := rs[0].Bindings
	denials, err := messages(bindings["deny"])
	if err != nil {
		return nil, e.fail(decision, ErrInvalidDecision, nil,
			"%s policy (%s) gave an invalid %s for %s: %s", what, c.source, denyRule, subject, err)
	}
	if len(denials) > 0 {
		denialsTotal.WithLabelValues(decision).Inc()
		return nil, &denyError{Decision: what, Source: c.source, Subject: subject, Rule: denyRule, Messages: denials}
	}
	values, _ := bindings["decision"].([]any)
	if len(values) == 0 {
		rule := placementRule
		hint := `make it return {"metro": "<metro>"} or {"facility": "<facility>"}, or add a deny message that says why not`
		if decision == decisionSelection {
			rule = selectionRule
			hint = "make it a set of node names (selected_nodes contains name if { ... }), or add a deny message that says why not"
		}
		return nil, e.fail(decision, errUndefined, nil,
			"%s policy (%s) gave no decision for %s: %s is undefined and %s is empty; %s", what, c.source, subject, rule, denyRule, hint)
	}
	return values[0], nil
}

// fail counts a failed decision and builds its error.
func (e *Engine) fail(decision string, kind, cause error, format string, args ...any) error {
	errorsTotal.WithLabelValues(decision, errorReason(kind)).Inc()
	return &decisionError{kind: kind, cause: cause, msg: oneLine(fmt.Sprintf(format, args...))}
}

func dirOf(c *compiled) string {
	if c.source == "built-in" {
		return ""
	}
	return c.source[len("in "):]
}

// messages reads the deny binding: [] when the deny rule is undefined,
// else [set]. A message that is not a string is shown as JSON.
func messages(binding any) ([]string, error) {
	outer, _ := binding.([]any)
	if len(outer) == 0 {
		return nil, nil
	}
	set, ok := outer[0].([]any)
	if !ok {
		return nil, fmt.Errorf("it is %s; it must be a set of messages (deny contains msg if { ... })", clip(jsonText(outer[0]), 200))
	}
	msgs := make([]string, 0, len(set))
	for _, m := range set {
		s, ok := m.(string)
		if !ok {
			s = jsonText(m)
		}
		msgs = append(msgs, oneLine(s))
	}
	sort.Strings(msgs)
	return msgs, nil
}

// placementFrom checks the placement value: an object with exactly one of
// "metro" and "facility", a non-empty string. Anything else (including a
// typo like "Metro") is refused rather than guessed at.
func placementFrom(v any) (location.Location, error) {
	const want = `it must be {"metro": "<metro>"} or {"facility": "<facility>"}`
	obj, ok := v.(map[string]any)
	if !ok || len(obj) != 1 {
		return location.Location{}, errors.New(want)
	}
	for k, val := range obj {
		s, ok := val.(string)
		if !ok || s == "" {
			return location.Location{}, errors.New(want + " with a non-empty string")
		}
		switch k {
		case "metro":
			return location.Location{Metro: s}, nil
		case "facility":
			return location.Location{Facility: s}, nil
		}
	}
	return location.Location{}, errors.New(want)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// logReload logs the outcome of a reload Watch made.
func (e *Engine) logReload(ctx context.Context, err error) {
	logger := klog.FromContext(ctx)
	if err != nil {
		logger.Error(err, "Policy reload failed", "dir", e.dir)
		return
	}
	logger.Info("Policies reloaded", "dir", e.dir, "digest", e.Digest())
}
