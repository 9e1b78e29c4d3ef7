package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// auditPolicy records every request once it completes, with who, what verb
// and which object, but no bodies (level Metadata): enough to list the calls
// a component made and compare them with its RBAC rules.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// AuditEvents reads back every event kube-apiserver has written to the audit
// log so far (Options.AuditLog must be set). The log is written while each
// request completes, so the events of a call the client has seen return may
// follow a moment later; poll if a test needs the last one.
func (e *Env) AuditEvents() ([]auditv1.Event, error) {
	if e.AuditLogPath == "" {
		return nil, errors.New("testenv: the audit log is off: set Options.AuditLog to read audit events")
	}
	data, err := os.ReadFile(e.AuditLogPath)
	if err != nil {
		return nil, fmt.Errorf("testenv: reading audit log: %w", err)
	}
	return parseAuditLog(data)
}

// parseAuditLog decodes the JSON-lines audit log. A last line without its
// newline is being written and is left for the next read.
func parseAuditLog(data []byte) ([]auditv1.Event, error) {
	if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
		data = data[:i+1]
	}
	var events []auditv1.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev auditv1.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("testenv: audit log line %d is not an audit event: %w", n, err)
		}
		events = append(events, ev)
	}
	return events, sc.Err()
}

// APICall is one request as RBAC sees it: who asked for which verb on what.
type APICall struct {
	User        string // the effective user (the impersonated one, if any)
	Verb        string // RBAC verb: get, list, watch, create, update, patch, delete, ...
	APIGroup    string // "" for the core group
	APIVersion  string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	Path        string // for non-resource requests (discovery, /healthz): the URL path
	Code        int32  // HTTP status code, 0 if unknown
	UserAgent   string
}

// String renders the call like "alice list services -n default" for test
// failure messages.
func (c APICall) String() string {
	var b strings.Builder
	b.WriteString(c.User + " " + c.Verb + " ")
	if c.Resource == "" {
		b.WriteString(c.Path)
	} else {
		b.WriteString(c.Resource)
		if c.APIGroup != "" {
			b.WriteString("." + c.APIGroup)
		}
		if c.Subresource != "" {
			b.WriteString("/" + c.Subresource)
		}
		if c.Name != "" {
			b.WriteString(" " + c.Name)
		}
		if c.Namespace != "" {
			b.WriteString(" -n " + c.Namespace)
		}
	}
	if c.Code != 0 {
		fmt.Fprintf(&b, " (%d)", c.Code)
	}
	return b.String()
}

// Calls turns audit events into one APICall per request, in log order. A
// request can have several events (a watch logs ResponseStarted and later
// ResponseComplete); only its first is kept.
func Calls(events []auditv1.Event) []APICall {
	seen := make(map[string]bool, len(events))
	calls := make([]APICall, 0, len(events))
	for _, ev := range events {
		if ev.AuditID != "" {
			if seen[string(ev.AuditID)] {
				continue
			}
			seen[string(ev.AuditID)] = true
		}
		c := APICall{User: ev.User.Username, Verb: ev.Verb, UserAgent: ev.UserAgent}
		if ev.ImpersonatedUser != nil {
			c.User = ev.ImpersonatedUser.Username
		}
		if ev.ResponseStatus != nil {
			c.Code = ev.ResponseStatus.Code
		}
		if r := ev.ObjectRef; r != nil {
			c.APIGroup, c.APIVersion = r.APIGroup, r.APIVersion
			c.Resource, c.Subresource = r.Resource, r.Subresource
			c.Namespace, c.Name = r.Namespace, r.Name
		} else {
			c.Path, _, _ = strings.Cut(ev.RequestURI, "?")
		}
		calls = append(calls, c)
	}
	return calls
}

// CallsBy keeps the calls made by one user.
func CallsBy(calls []APICall, user string) []APICall {
	var out []APICall
	for _, c := range calls {
		if c.User == user {
			out = append(out, c)
		}
	}
	return out
}
