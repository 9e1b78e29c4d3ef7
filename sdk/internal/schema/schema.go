// Package schema checks a module's output objects the way the API server
// will, before the host applies them: against the schema of their kind
// (embedded data, see schemas/ and load.go), against the kind-specific rules
// of the built-in kinds (builtin.go for ConfigMap and Secret, workloads.go
// for the others), and against the API server's size limits (limits.go).
// sdktest runs the same checks, so a module whose tests pass writes nothing
// the API server refuses for these reasons.
//
// The objects are the trees wasmhost decodes: map[string]any, []any, string,
// json.Number, bool and nil. The walk neither copies nor changes them.
//
// The schemas are a structural subset of OpenAPI v3, generated from the real
// ones (Kubernetes' published OpenAPI for its GA kinds, MetalLB's CRDs) by a
// test in the main module, hack/sdkschema, which fails when they differ (go
// test -update rewrites them), one file per kind, read when a module first
// writes the kind. Checked: type, oneOf (of types), properties,
// additionalProperties, items, required, enum (of strings), min/maxLength,
// min/maxItems, min/maxProperties, minimum/maximum (and their exclusive
// forms), pattern, the formats of the types the API server decodes itself
// (Schema.Format), nullable, x-kubernetes-int-or-string,
// x-kubernetes-preserve-unknown-fields, x-kubernetes-list-type set and map
// (no duplicates, as server-side apply wants), and CRDs' CEL rules
// (x-kubernetes-validations, cel.go: with cel-go, the library the API
// server evaluates them with, on the value with its defaults filled in).
// Not checked: a CEL rule that compares with the stored object (oldSelf),
// which only an update has; the built-in kinds' validation beyond their
// schema, except the rules of builtin.go and workloads.go; and the object's
// metadata, apiVersion and kind, which the host checks itself. The
// generator refuses a schema that uses anything else, so a new keyword is
// noticed rather than silently skipped.
package schema

import (
	"encoding/json"
	"regexp"
)

// Schema is one node of a schema. The JSON names are OpenAPI's, so the
// embedded files read like the schemas they come from.
type Schema struct {
	// Type is object, array, string, integer, number or boolean; empty
	// allows any type (with IntOrString, an integer or a string).
	Type string `json:"type,omitempty"`
	// Format is kept only where it is checked, under the SDK's names for
	// what the API server decodes: "byte" (standard base64, padded),
	// "date-time" (RFC 3339, a metav1.Time), "micro-time" (RFC 3339 with
	// six fractional digits, a metav1.MicroTime), "quantity" (a
	// resource.Quantity) and, in the built-in kinds, "int32" and "int64"
	// (the Go field's range).
	Format string `json:"format,omitempty"`
	// OneOf lists the types a value may have when there are several (a
	// Quantity: a string or a number); the generator refuses any other use.
	OneOf                []*Schema          `json:"oneOf,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	// Required lists properties that must be present. The generator drops
	// a property that has a default: the API server fills it in before it
	// validates.
	Required         []string `json:"required,omitempty"`
	Enum             []string `json:"enum,omitempty"`
	MinLength        *int     `json:"minLength,omitempty"`
	MaxLength        *int     `json:"maxLength,omitempty"`
	MinItems         *int     `json:"minItems,omitempty"`
	MaxItems         *int     `json:"maxItems,omitempty"`
	MinProperties    *int     `json:"minProperties,omitempty"`
	MaxProperties    *int     `json:"maxProperties,omitempty"`
	Minimum          *float64 `json:"minimum,omitempty"`
	Maximum          *float64 `json:"maximum,omitempty"`
	ExclusiveMinimum bool     `json:"exclusiveMinimum,omitempty"`
	ExclusiveMaximum bool     `json:"exclusiveMaximum,omitempty"`
	Pattern          string   `json:"pattern,omitempty"`
	Nullable         bool     `json:"nullable,omitempty"`
	IntOrString      bool     `json:"x-kubernetes-int-or-string,omitempty"`
	// PreserveUnknownFields allows members the schema does not name (any
	// value); named ones are still checked.
	PreserveUnknownFields bool `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	// ListType "set" or "map" forbids duplicates (server-side apply, which
	// the host uses, refuses them): of whole items in a set, of the
	// ListMapKeys' values in a map.
	ListType    string   `json:"x-kubernetes-list-type,omitempty"`
	ListMapKeys []string `json:"x-kubernetes-list-map-keys,omitempty"`
	// Default is what the API server fills in for an absent member before
	// it validates; only the CEL rules see it here (celValue).
	Default any `json:"default,omitempty"`
	// Rules are the CRD's CEL rules on this node (cel.go).
	Rules []Rule `json:"x-kubernetes-validations,omitempty"`

	pattern *regexp.Regexp // Pattern, compiled when the schemas load
}

// Kind is the schema of one apiVersion and kind.
type Kind struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Schema     *Schema `json:"schema"`
}

// File is one embedded file: the kinds of one source.
type File struct {
	// Source says where the schemas come from (module@version and path),
	// for a reader of the file; nothing uses it.
	Source string `json:"source"`
	Kinds  []Kind `json:"kinds"`
}

// number is how a JSON number reaches the checks: as its text.
type number = json.Number
