package schema

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Error is a refusal: Path names the field (data.ip, spec.addresses[0],
// data["config.yaml"]), empty for the whole object.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Check checks obj, an object of apiVersion and kind as a module returned
// it, against what the API server will enforce when the host applies it
// (server-side apply with fieldValidation=Strict, as host/lbmodule does):
// the schema of its kind if the host knows it, the rules of a built-in
// kind, and the size limits of every object. A kind without a known schema
// gets the size limits only.
func Check(apiVersion, kind string, obj map[string]any) *Error {
	var c Checker
	return c.Check(apiVersion, kind, obj)
}

// Checker is Check for many objects: it keeps its memory from one object
// to the next, so that checking 10,000 allocates nothing per object. The
// zero value is ready to use; it is not safe for concurrent use.
type Checker struct{ w walker }

// Check is the package's Check.
func (c *Checker) Check(apiVersion, kind string, obj map[string]any) *Error {
	s := Lookup(apiVersion, kind)
	w := &c.w
	w.reset(false)
	if w.check(apiVersion, kind, obj, s) {
		return nil
	}
	// The walk visits maps in Go's order, which costs nothing; with a
	// problem found, walk again in key order, so that of several problems
	// the message names the same one every time.
	w.reset(true)
	if w.check(apiVersion, kind, obj, s) {
		return &Error{Msg: "refused in one walk and not in the other (a bug in the host)"}
	}
	return w.err
}

// walker walks one object. It stops at the first problem, in err.
type walker struct {
	sorted bool
	// size is a lower bound of the object's JSON encoding: every byte of
	// every name and value and the punctuation, escapes not counted.
	size int
	path []step
	err  *Error
}

// step is one step of the path to where the walk is: a member's name, or
// an index (index >= 0). The walk keeps its path as a stack of steps in
// the walker, turned into text only for an error: a linked path on the Go
// stack would escape to the heap through the recursion, an allocation per
// member visited.
type step struct {
	name  string
	index int
}

func (w *walker) push(name string) { w.path = append(w.path, step{name: name, index: -1}) }
func (w *walker) pushIndex(i int)  { w.path = append(w.path, step{index: i}) }
func (w *walker) pop()             { w.path = w.path[:len(w.path)-1] }

// pathString is the path as an error names it: spec.addresses[0],
// data["config.yaml"].
func pathString(path []step) string {
	var b strings.Builder
	for _, p := range path {
		switch {
		case p.index >= 0:
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
		case plainName(p.name):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p.name)
		default:
			// A map key such as config.yaml or kubernetes.io/hostname
			// would make a dotted path ambiguous.
			b.WriteString("[" + strconv.Quote(p.name) + "]")
		}
	}
	return b.String()
}

func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (w *walker) reset(sorted bool) {
	*w = walker{sorted: sorted, path: w.path[:0]}
}

// fail records a problem at the current path.
func (w *walker) fail(format string, args ...any) bool {
	w.err = &Error{Path: pathString(w.path), Msg: fmt.Sprintf(format, args...)}
	return false
}

// failAt records a problem at the current path and then names.
func (w *walker) failAt(names []string, format string, args ...any) bool {
	for _, n := range names {
		w.push(n)
	}
	return w.fail(format, args...)
}

func (w *walker) check(apiVersion, kind string, obj map[string]any, s *Schema) bool {
	if !w.object(obj, s) || !w.metadata(obj) {
		return false
	}
	if s != nil && len(s.Rules) > 0 && !w.rules(obj, s) {
		return false
	}
	if w.size > MaxObjectBytes {
		return w.fail("is at least %d bytes as JSON, over etcd's default request limit of %d bytes (1.5 MiB); split it into smaller objects", w.size, MaxObjectBytes)
	}
	// A switch, not a table of funcs: a call through a func value would
	// move the walker to the heap, an allocation per object.
	switch {
	case apiVersion == "v1" && kind == "ConfigMap":
		return configMapRules(w, obj)
	case apiVersion == "v1" && kind == "Secret":
		return secretRules(w, obj)
	case apiVersion == "v1" && kind == "Service":
		return serviceRules(w, obj)
	case apiVersion == "rbac.authorization.k8s.io/v1" && kind == "RoleBinding":
		return roleBindingRules(w, obj, false)
	case apiVersion == "rbac.authorization.k8s.io/v1" && kind == "ClusterRoleBinding":
		return roleBindingRules(w, obj, true)
	case apiVersion == "discovery.k8s.io/v1" && kind == "EndpointSlice":
		return endpointSliceRules(w, obj)
	case apiVersion == "apps/v1" && (kind == "DaemonSet" || kind == "Deployment" || kind == "ReplicaSet" || kind == "StatefulSet"):
		return workloadRules(w, obj)
	case apiVersion == "policy/v1" && kind == "PodDisruptionBudget":
		return podDisruptionBudgetRules(w, obj)
	}
	return true
}

// metadata counts the size of the object's metadata and enforces the limit
// on its annotations. The host has checked that metadata holds name,
// namespace, and labels and annotations that are maps of strings, so
// those are looked up rather than walked: a map iteration fewer per object.
func (w *walker) metadata(obj map[string]any) bool {
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		return true
	}
	w.size += 2 + max(len(md)-1, 0)
	for _, k := range [...]string{"name", "namespace"} {
		if v, ok := md[k].(string); ok {
			w.size += len(k) + 3 + len(v) + 2
		}
	}
	labels, _ := md["labels"].(map[string]any)
	if labels != nil {
		w.size += len("labels") + 3 + stringMapSize(labels)
	}
	anns, _ := md["annotations"].(map[string]any)
	if anns == nil {
		return true
	}
	total := 0
	for k, v := range anns {
		s, _ := v.(string)
		total += len(k) + len(s)
	}
	// As stringMapSize counts, from the total already there.
	w.size += len("annotations") + 3 + 2 + max(len(anns)-1, 0) + total + 5*len(anns)
	if total > MaxAnnotationBytes {
		return w.failAt([]string{"metadata", "annotations"}, "total %d bytes of keys and values, over the API server's limit of %d (256 KiB)", total, MaxAnnotationBytes)
	}
	return true
}

// stringMapSize is the JSON size of a map of strings, escapes not counted.
func stringMapSize(m map[string]any) int {
	n := 2 + max(len(m)-1, 0)
	for k, v := range m {
		s, _ := v.(string)
		n += len(k) + len(s) + 5
	}
	return n
}

// object checks m against s (nil: anything goes, only the size counts).
// At the top (an empty path), apiVersion, kind and metadata are the host's to
// check and only counted.
func (w *walker) object(m map[string]any, s *Schema) bool {
	w.size += 2 + max(len(m)-1, 0)
	if s != nil {
		if s.MinProperties != nil && len(m) < *s.MinProperties {
			return w.fail("must have at least %d members, got %d", *s.MinProperties, len(m))
		}
		if s.MaxProperties != nil && len(m) > *s.MaxProperties {
			return w.fail("must have at most %d members, got %d", *s.MaxProperties, len(m))
		}
	}
	if w.sorted {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !w.member(k, m[k], s) {
				return false
			}
		}
	} else {
		for k, v := range m {
			if !w.member(k, v, s) {
				return false
			}
		}
	}
	if s != nil {
		for _, r := range s.Required {
			v, ok := m[r]
			if ok && (v != nil || s.Properties[r] != nil && s.Properties[r].Nullable) {
				continue
			}
			return w.failAt([]string{r}, "required, but missing")
		}
	}
	return true
}

func (w *walker) member(k string, v any, s *Schema) bool {
	w.size += len(k) + 3
	if len(w.path) == 0 {
		// The host checks these itself; metadata counts apart.
		switch k {
		case "metadata":
			return true
		case "apiVersion", "kind":
			return w.value(v, nil) // only counted
		}
	}
	var sub *Schema
	if s != nil {
		if sub = s.Properties[k]; sub == nil {
			sub = s.AdditionalProperties
			if sub == nil && closed(s) {
				// The host applies with fieldValidation=Strict:
				// the API server refuses a field the schema does not
				// name instead of dropping it.
				return w.failAt([]string{k}, "unknown field")
			}
		}
	}
	if v == nil {
		// A null member is dropped (or defaulted) by the API server
		// unless the field is nullable, where null is kept: valid
		// either way. A required one is missing, which object checks.
		w.size += 4
		return true
	}
	w.push(k)
	ok := w.value(v, sub)
	w.pop()
	return ok
}

// closed reports whether s names every member an object may have.
func closed(s *Schema) bool {
	return !s.PreserveUnknownFields && (s.Type == "object" || len(s.Properties) > 0)
}

// value checks v against s (nil: anything goes), its CEL rules last.
func (w *walker) value(v any, s *Schema) bool {
	if !w.plainValue(v, s) {
		return false
	}
	if s != nil && len(s.Rules) > 0 {
		return w.rules(v, s)
	}
	return true
}

func (w *walker) plainValue(v any, s *Schema) bool {
	if s == nil {
		// Nothing to check here but the size, which a plain walk
		// counts in half the time.
		if n, ok := jsonSize(v); ok {
			w.size += n
			return true
		}
	}
	switch x := v.(type) {
	case map[string]any:
		if s != nil && !allows(s, "object") {
			return w.typeError(s, "object")
		}
		return w.object(x, s)
	case []any:
		if s != nil && !allows(s, "array") {
			return w.typeError(s, "array")
		}
		return w.array(x, s)
	case string:
		w.size += len(x) + 2
		if s != nil {
			if !allows(s, "string") {
				return w.typeError(s, "string")
			}
			return w.stringValue(x, s)
		}
	case number:
		w.size += len(x)
		if s != nil {
			t := "number"
			if isInteger(x) {
				t = "integer"
			}
			if !allows(s, t) {
				if allows(s, "integer") {
					// An integer is wanted: say which number is not one.
					return w.typeError(s, string(x))
				}
				return w.typeError(s, "number")
			}
			return w.numberValue(x, s)
		}
	case bool:
		w.size += 5
		if x {
			w.size--
		}
		if s != nil && !allows(s, "boolean") {
			return w.typeError(s, "boolean")
		}
	case nil:
		w.size += 4
		if s != nil && !s.Nullable && (s.Type != "" || s.IntOrString) {
			return w.typeError(s, "null")
		}
	default:
		// The host's decoders make nothing else, but ValidateOutput is
		// public: an object built in Go (a test's, with float64, int,
		// map[string]string, a struct) is checked as the JSON the host
		// would send, which is what the API server sees.
		j, ok := asJSON(v)
		if !ok {
			return w.fail("holds a Go %T, which does not encode as JSON", v)
		}
		return w.value(j, s)
	}
	return true
}

// jsonSize is the size walker counts for v, or false if v holds a value
// the host's decoders do not make.
func jsonSize(v any) (int, bool) {
	switch x := v.(type) {
	case string:
		return len(x) + 2, true
	case map[string]any:
		n := 2 + max(len(x)-1, 0)
		for k, e := range x {
			m, ok := jsonSize(e)
			if !ok {
				return 0, false
			}
			n += len(k) + 3 + m
		}
		return n, true
	case []any:
		n := 2 + max(len(x)-1, 0)
		for _, e := range x {
			m, ok := jsonSize(e)
			if !ok {
				return 0, false
			}
			n += m
		}
		return n, true
	case number:
		return len(x), true
	case bool:
		if x {
			return 4, true
		}
		return 5, true
	case nil:
		return 4, true
	}
	return 0, false
}

// asJSON is v encoded as JSON and decoded as the host decodes.
func asJSON(v any) (any, bool) {
	switch x := v.(type) {
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, false
		}
		return number(strconv.FormatFloat(x, 'g', -1, 64)), true
	case int:
		return number(strconv.Itoa(x)), true
	case int64:
		return number(strconv.FormatInt(x, 10)), true
	case int32:
		return number(strconv.FormatInt(int64(x), 10)), true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, false
	}
	return out, true
}

func (w *walker) array(a []any, s *Schema) bool {
	w.size += 2 + max(len(a)-1, 0)
	var items *Schema
	if s != nil {
		if s.MinItems != nil && len(a) < *s.MinItems {
			return w.fail("must have at least %d items, got %d", *s.MinItems, len(a))
		}
		if s.MaxItems != nil && len(a) > *s.MaxItems {
			return w.fail("must have at most %d items, got %d", *s.MaxItems, len(a))
		}
		items = s.Items
	}
	for i, e := range a {
		w.pushIndex(i)
		ok := w.value(e, items)
		w.pop()
		if !ok {
			return false
		}
	}
	if s != nil && (s.ListType == "set" || s.ListType == "map") && len(a) > 1 {
		return w.unique(a, s)
	}
	return true
}

// canonical is v with its numbers as float64: 80 and 80.0 are one number.
func canonical(v any) any {
	switch x := v.(type) {
	case number:
		if f, err := x.Float64(); err == nil {
			return f
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canonical(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = canonical(e)
		}
		return out
	}
	return v
}

// unique refuses a duplicate in a list of type set (two equal items) or
// map (two items with the same values of the list's keys, an absent key
// taking its default), as server-side apply does.
func (w *walker) unique(a []any, s *Schema) bool {
	seen := make(map[string]int, len(a))
	for i, e := range a {
		key := e
		if s.ListType == "map" {
			m, _ := e.(map[string]any)
			k := make([]any, len(s.ListMapKeys))
			for j, name := range s.ListMapKeys {
				v, ok := m[name]
				if (!ok || v == nil) && s.Items != nil && s.Items.Properties[name] != nil {
					v = s.Items.Properties[name].Default
				}
				k[j] = v
			}
			key = k
		}
		b, err := json.Marshal(canonical(key))
		if err != nil {
			continue
		}
		canon := string(b)
		if prev, dup := seen[canon]; dup {
			w.pushIndex(i)
			if s.ListType == "map" {
				return w.fail("duplicates item %d: the same %s (%s)", prev, strings.Join(s.ListMapKeys, ", "), canon)
			}
			return w.fail("duplicates item %d: a set holds each value once", prev)
		}
		seen[canon] = i
	}
	return true
}

func (w *walker) stringValue(x string, s *Schema) bool {
	if s.MinLength != nil || s.MaxLength != nil {
		// OpenAPI counts characters, not bytes.
		n := utf8.RuneCountInString(x)
		if s.MinLength != nil && n < *s.MinLength {
			return w.fail("must be at least %d characters, got %d", *s.MinLength, n)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return w.fail("must be at most %d characters, got %d", *s.MaxLength, n)
		}
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, x) {
		return w.fail("must be one of %s, got %q", quoteAll(s.Enum), x)
	}
	if s.pattern != nil && !s.pattern.MatchString(x) {
		return w.fail("must match the pattern %q, got %q", s.Pattern, x)
	}
	switch s.Format {
	case "byte":
		if _, err := base64.StdEncoding.DecodeString(x); err != nil {
			return w.fail("must be base64 (standard alphabet, padded): %v", err)
		}
	case "date-time":
		// As metav1.Time decodes it.
		if _, err := time.Parse(time.RFC3339, x); err != nil {
			return w.fail("must be a time in RFC 3339 form (2006-01-02T15:04:05Z): %v", err)
		}
	case "micro-time":
		// As metav1.MicroTime decodes it: six fractional digits.
		if _, err := time.Parse(rfc3339Micro, x); err != nil {
			return w.fail("must be a time in RFC 3339 form with microseconds (2006-01-02T15:04:05.000000Z): %v", err)
		}
	case "quantity":
		if err := checkQuantity(x); err != nil {
			return w.fail("must be a quantity (such as 100m, 1.5, 64Mi or 1e3): %v", err)
		}
	}
	return true
}

// rfc3339Micro is metav1.RFC3339Micro.
const rfc3339Micro = "2006-01-02T15:04:05.000000Z07:00"

func (w *walker) numberValue(x number, s *Schema) bool {
	switch s.Format {
	case "int32", "int64":
		// A built-in kind's Go field: the API server cannot decode a
		// number outside its range.
		bits := 32
		if s.Format == "int64" {
			bits = 64
		}
		if _, err := strconv.ParseInt(string(x), 10, bits); err != nil && !strings.ContainsAny(string(x), ".eE") {
			return w.fail("must fit in a %d-bit integer, got %s", bits, x)
		}
	}
	if s.Minimum == nil && s.Maximum == nil {
		return true
	}
	f, err := strconv.ParseFloat(string(x), 64)
	if err != nil {
		return w.fail("is not a number: %v", err)
	}
	if m := s.Minimum; m != nil && (f < *m || s.ExclusiveMinimum && f == *m) {
		return w.fail("must be %s %s, got %s", map[bool]string{false: "at least", true: "greater than"}[s.ExclusiveMinimum], fmtNumber(*m), x)
	}
	if m := s.Maximum; m != nil && (f > *m || s.ExclusiveMaximum && f == *m) {
		return w.fail("must be %s %s, got %s", map[bool]string{false: "at most", true: "less than"}[s.ExclusiveMaximum], fmtNumber(*m), x)
	}
	return true
}

// allows reports whether a value of JSON type t (object, array, string,
// integer, number, boolean) may stand where s is.
func allows(s *Schema, t string) bool {
	switch s.Type {
	case "":
		if len(s.OneOf) > 0 {
			for _, o := range s.OneOf {
				if allows(o, t) {
					return true
				}
			}
			return false
		}
		return !s.IntOrString || t == "integer" || t == "string"
	case "number":
		return t == "number" || t == "integer"
	}
	return s.Type == t
}

// isInteger reports whether a JSON number is an integer. 2.0 and 1e3 are:
// the API server decodes them to a float and accepts an integral one
// where the schema wants an integer.
func isInteger(x number) bool {
	if !strings.ContainsAny(string(x), ".eE") {
		return true
	}
	f, err := strconv.ParseFloat(string(x), 64)
	return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
}

func (w *walker) typeError(s *Schema, got string) bool {
	want := s.Type
	switch {
	case s.Type == "" && s.IntOrString:
		want = "integer or a string"
	case s.Type == "" && len(s.OneOf) > 0:
		types := make([]string, len(s.OneOf))
		for i, o := range s.OneOf {
			types[i] = o.Type
		}
		want = strings.Join(types, " or a ")
	}
	return w.fail("must be %s, got %s", article(want), got)
}

func article(t string) string {
	switch t[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + t
	}
	return "a " + t
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func fmtNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
