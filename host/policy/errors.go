package policy

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// Kinds of failed decisions. Every error Placement and SelectNodes return
// matches exactly one of them with errors.Is, and its message is one line
// fit for a Kubernetes Event: which policy, which rule, what to change.
var (
	// errDenied: the policy's deny set is not empty (see *denyError).
	errDenied = errors.New("policy denied the decision")
	// errUndefined: the queried rule has no value for this input.
	errUndefined = errors.New("policy decision is undefined")
	// ErrInvalidDecision: the rule's value has the wrong shape or type.
	ErrInvalidDecision = errors.New("policy decision is invalid")
	// ErrEvaluation: evaluating the policy failed (a conflict between
	// rules, a builtin error, ...).
	ErrEvaluation = errors.New("policy evaluation failed")
	// ErrTimeout: the evaluation ran past Options.Timeout or the caller's
	// context ended first.
	ErrTimeout = errors.New("policy evaluation timed out")
)

// denyError is a decision the policy refused with deny messages.
type denyError struct {
	// Decision is "EIP placement" or "BGP selection"; Source says which
	// policies (built-in or a directory); Subject is what was decided
	// about, for example "Service shop/web".
	Decision, Source, Subject string
	// Rule is the deny rule queried, for example data.equinix.eip.deny.
	Rule string
	// Messages are the policy's messages, sorted, never empty.
	Messages []string
}

func (e *denyError) Error() string {
	var b strings.Builder
	b.WriteString(e.Decision)
	b.WriteString(" policy (")
	b.WriteString(e.Source)
	b.WriteString(") denied")
	if e.Subject != "" {
		b.WriteString(" ")
		b.WriteString(e.Subject)
	}
	b.WriteString(": ")
	b.WriteString(oneLine(strings.Join(e.Messages, "; ")))
	return b.String()
}

// Is makes errors.Is(err, errDenied) true for a *denyError.
func (e *denyError) Is(target error) bool { return target == errDenied }

// Denied reports whether err is a policy's own refusal (its deny set)
// rather than a broken decision: check-policies accepts a policy that
// denies a sample input, as a policy may, and refuses one whose decision
// is undefined, of the wrong type or fails to evaluate.
func Denied(err error) bool { return errors.Is(err, errDenied) }

// decisionError is every other failed decision: its kind is one of the
// sentinels above, its cause (if any) the OPA error.
type decisionError struct {
	kind  error
	msg   string
	cause error
}

func (e *decisionError) Error() string { return e.msg }
func (e *decisionError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// oneLine folds a (possibly multi-line) message into one line, because
// Events and log lines are read one line at a time.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip shortens s to at most n bytes with an ellipsis, so a huge decision
// value cannot flood an Event. It cuts at the start of a character: a cut
// inside one would leave invalid UTF-8 in the Event and the log line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
