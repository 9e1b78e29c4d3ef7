// Package specvalidate checks HTTP exchanges with the Equinix Metal API
// against the metalv1 OpenAPI spec that ships inside the equinix-sdk-go
// module (spec/services/metalv1/oas3.patched/, a multi-file spec loaded
// with its $refs by kin-openapi).
//
// By default it is stricter than the spec: every object schema that lists
// properties gets additionalProperties:false (unless the spec says
// otherwise), so a field the SDK would tolerate but the real API never
// sends is caught. Requests are checked too (parameters and bodies), which
// catches a client sending what the real API would refuse.
//
// Use Transport (or Instrument) to wrap the HTTP client an SDK
// configuration uses, so every exchange of a test is checked.
package specvalidate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"sigs.k8s.io/yaml"
)

// SDKModule and SDKVersion name the module whose spec is used.
const (
	SDKModule  = "github.com/equinix/equinix-sdk-go"
	SDKVersion = "v0.66.0"
	specPath   = "spec/services/metalv1/oas3.patched/openapi3.yaml"
	basePath   = "/metal/v1"
)

// SpecFile finds openapi3.yaml of the SDK module: through `go list -m`
// (which honours the module's replace directives), falling back to
// GOMODCACHE.
func SpecFile() (string, error) {
	var tried []string
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", SDKModule).Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), specPath)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
			cache = strings.TrimSpace(string(out))
		}
	}
	if cache != "" {
		p := filepath.Join(cache, SDKModule+"@"+SDKVersion, specPath)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("the metalv1 OpenAPI spec of %s@%s was not found (tried %s); run `go mod download %s`",
		SDKModule, SDKVersion, strings.Join(tried, ", "), SDKModule)
}

// Options tune a Validator.
type Options struct {
	// Lenient keeps the spec's own additionalProperties (unknown fields
	// allowed), instead of rejecting unknown fields in every object.
	Lenient bool
	// SkipRequests checks responses only.
	SkipRequests bool
	// AllPaths loads every path of the spec (a few seconds), instead of
	// only EmulatedPaths.
	AllPaths bool
}

// EmulatedPaths are the spec paths loaded by default: the ones the
// emulator serves.
var EmulatedPaths = []string{
	"/devices/{id}", "/devices/{id}/bgp/neighbors", "/devices/{id}/bgp/sessions", "/devices/{id}/ips",
	"/ips/{id}", "/projects/{id}", "/projects/{id}/bgp-config", "/projects/{id}/bgp-configs",
	"/projects/{id}/devices", "/projects/{id}/ips", "/locations/metros", "/locations/metros/{id}", "/facilities",
}

// Validator checks exchanges against the spec. It is safe for concurrent
// use.
type Validator struct {
	opts        Options
	doc         *openapi3.T
	router      routers.Router
	errorSchema *openapi3.Schema
}

var (
	loadMu sync.Mutex
	loaded = map[Options]*Validator{}
)

// Load loads the spec (once per process and Options).
func Load(opts Options) (*Validator, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if v := loaded[opts]; v != nil {
		return v, nil
	}
	file, err := SpecFile()
	if err != nil {
		return nil, err
	}
	doc, err := loadDoc(file, opts.AllPaths)
	if err != nil {
		return nil, err
	}
	if !opts.Lenient {
		strictify(doc)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing %s: %w", file, err)
	}
	es := doc.Components.Schemas["Error"]
	if es == nil || es.Value == nil {
		return nil, errors.New("the spec has no Error schema")
	}
	v := &Validator{opts: opts, doc: doc, router: router, errorSchema: es.Value}
	loaded[opts] = v
	return v, nil
}

// loadDoc loads the spec with its $refs. Unless all is set, the root
// document is first cut down to EmulatedPaths (and the Error schema):
// resolving every path of the spec takes seconds, these take a fraction.
// The cut root is loaded as if it were the file itself, so its relative
// $refs resolve in the SDK's spec directory.
func loadDoc(file string, all bool) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	if all {
		doc, err := loader.LoadFromFile(file)
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", file, err)
		}
		return doc, nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var root map[string]any
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", file, err)
	}
	paths, _ := root["paths"].(map[string]any)
	kept := map[string]any{}
	for _, p := range EmulatedPaths {
		if paths[p] == nil {
			return nil, fmt.Errorf("%s has no path %s", file, p)
		}
		kept[p] = paths[p]
	}
	root["paths"] = kept
	comps, _ := root["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	root["components"] = map[string]any{
		"securitySchemes": comps["securitySchemes"],
		"schemas":         map[string]any{"Error": schemas["Error"]},
	}
	delete(root, "tags")
	delete(root, "x-tagGroups")
	cut, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	doc, err := loader.LoadFromDataWithPath(cut, &url.URL{Path: filepath.ToSlash(file)})
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", file, err)
	}
	return doc, nil
}

// strictify sets additionalProperties:false on every object schema that
// lists properties and says nothing about additional ones, except schemas
// that are combined by allOf with another schema listing properties (there
// each part must accept the other's fields).
func strictify(doc *openapi3.T) {
	var all []*openapi3.Schema
	seen := map[*openapi3.Schema]bool{}
	var walk func(ref *openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		all = append(all, s)
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		walk(s.Not)
		for _, l := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, x := range l {
				walk(x)
			}
		}
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
	for _, pi := range doc.Paths.Map() {
		for _, op := range pi.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for _, mt := range op.RequestBody.Value.Content {
					walk(mt.Schema)
				}
			}
			for _, rr := range op.Responses.Map() {
				if rr.Value == nil {
					continue
				}
				for _, mt := range rr.Value.Content {
					walk(mt.Schema)
				}
			}
		}
	}
	exempt := map[*openapi3.Schema]bool{}
	for _, s := range all {
		n := 0
		for _, x := range s.AllOf {
			if x.Value != nil && len(x.Value.Properties) > 0 {
				n++
			}
		}
		if n > 1 {
			for _, x := range s.AllOf {
				exempt[x.Value] = true
			}
		}
	}
	no := false
	for _, s := range all {
		if len(s.Properties) == 0 || exempt[s] || s.AdditionalProperties.Has != nil || s.AdditionalProperties.Schema != nil {
			continue
		}
		s.AdditionalProperties.Has = &no
	}
}

func (v *Validator) schemaOptions() []openapi3.SchemaValidationOption {
	return []openapi3.SchemaValidationOption{
		openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)),
		openapi3.WithStringFormatValidator("ipv4", openapi3.NewIPValidator(true)),
		openapi3.SetSchemaRegexCompiler(compileRegex),
	}
}

// compileRegex compiles the spec's patterns. Go's regexp lacks lookahead,
// which the spec uses at the start of patterns (BgpConfigRequestInput.md5:
// ^(?=.*[a-z])(?=.*[A-Z])(?=.*\d)[a-zA-Z\d]{10,20}$); leading positive
// lookaheads are rewritten as separate patterns that must all match.
func compileRegex(expr string) (openapi3.RegexMatcher, error) {
	if re, err := regexp.Compile(expr); err == nil {
		return re, nil
	}
	rest, ok := strings.CutPrefix(expr, "^")
	if !ok {
		return nil, fmt.Errorf("pattern %q: unsupported syntax", expr)
	}
	var all multiMatcher
	for strings.HasPrefix(rest, "(?=") {
		depth, end := 0, -1
		for i := 0; i < len(rest) && end < 0; i++ {
			switch rest[i] {
			case '\\':
				i++
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					end = i
				}
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("pattern %q: unbalanced lookahead", expr)
		}
		re, err := regexp.Compile("^(?:" + rest[3:end] + ")")
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", expr, err)
		}
		all = append(all, re)
		rest = rest[end+1:]
	}
	re, err := regexp.Compile("^" + rest)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", expr, err)
	}
	return append(all, re), nil
}

type multiMatcher []*regexp.Regexp

func (m multiMatcher) MatchString(s string) bool {
	for _, re := range m {
		if !re.MatchString(s) {
			return false
		}
	}
	return true
}

// Check validates one exchange: the request (method, URL, headers, body)
// and the response (status, headers, body). Responses that are injected
// faults (429 and 5xx) are only checked to carry the Error body. A status
// the spec does not declare for the operation is accepted for errors (4xx)
// with an Error body, and refused otherwise.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	ctx := context.Background()
	// Route as if talking to the real server.
	u := *req.URL
	if !strings.HasPrefix(u.Path, basePath+"/") {
		return fmt.Errorf("%s %s: not below %s", req.Method, u.Path, basePath)
	}
	u.Scheme, u.Host = "https", "api.equinix.com"
	rr := req.Clone(ctx)
	rr.URL = &u
	rr.Host = u.Host
	rr.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := v.router.FindRoute(rr)
	if err != nil {
		return fmt.Errorf("%s %s: not in the spec (or not among EmulatedPaths; Options.AllPaths loads all): %w", req.Method, req.URL.Path, err)
	}
	what := fmt.Sprintf("%s %s (%s)", req.Method, req.URL.RequestURI(), route.Operation.OperationID)
	var errs []error
	rin := &openapi3filter.RequestValidationInput{
		Request: rr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
			MultiError:              true,
			SchemaValidationOptions: v.schemaOptions(),
		},
	}
	if !v.opts.SkipRequests {
		if err := openapi3filter.ValidateRequest(ctx, rin); err != nil {
			errs = append(errs, fmt.Errorf("request: %w", err))
		}
	}
	declared := route.Operation.Responses.Status(status) != nil
	switch {
	case status == http.StatusTooManyRequests || status >= 500 || (!declared && status >= 400):
		var val any
		if err := json.Unmarshal(body, &val); err != nil {
			errs = append(errs, fmt.Errorf("%d response: the body is not JSON: %w", status, err))
		} else if err := v.errorSchema.VisitJSON(val, v.schemaOptions()...); err != nil {
			errs = append(errs, fmt.Errorf("%d response: not an Error body: %w", status, err))
		}
	case status == http.StatusNoContent:
		if len(bytes.TrimSpace(body)) > 0 {
			errs = append(errs, fmt.Errorf("204 response with a body: %q", body))
		}
		if !declared {
			errs = append(errs, errors.New("204 is not a status this operation answers"))
		}
	default:
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: rin, Status: status, Header: header,
			Body: io.NopCloser(bytes.NewReader(body)),
			Options: &openapi3filter.Options{
				IncludeResponseStatus: true, MultiError: true, SchemaValidationOptions: v.schemaOptions(),
			},
		}
		if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
			errs = append(errs, fmt.Errorf("%d response: %w", status, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", what, errors.Join(errs...))
	}
	return nil
}

// Transport wraps an http.RoundTripper (nil: http.DefaultTransport) so
// every exchange is checked; report gets each problem. Exchanges that fail
// at the transport level (resets) are passed through unchecked.
func (v *Validator) Transport(next http.RoundTripper, report func(error)) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{v: v, next: next, report: report}
}

type transport struct {
	v      *Validator
	next   http.RoundTripper
	report func(error)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if cerr := t.v.Check(req, reqBody, resp.StatusCode, resp.Header, body); cerr != nil {
		t.report(cerr)
	}
	return resp, nil
}

// Instrument makes an SDK configuration check every exchange against the
// spec, failing the test on any problem. It keeps the configuration's
// HTTP client settings (timeout, transport) and wraps its transport.
func Instrument(t testing.TB, cfg *metalv1.Configuration, opts Options) {
	t.Helper()
	v, err := Load(opts)
	if err != nil {
		t.Fatalf("specvalidate: %v", err)
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		*hc = *cfg.HTTPClient
	}
	hc.Transport = v.Transport(hc.Transport, func(err error) {
		t.Helper()
		t.Errorf("OpenAPI spec: %v", err)
	})
	cfg.HTTPClient = hc
}
