package wasmhost

import (
	"fmt"
	"sort"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/internal/schema"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/kubenames"
)

// ValidationError is output the host refuses. Forbidden marks output that is
// well-formed but outside what the module declared (another kind, another
// namespace, someone else's annotations); the rest is malformed.
type ValidationError struct {
	Forbidden bool
	Msg       string
}

func (e *ValidationError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) error {
	return &ValidationError{Forbidden: true, Msg: fmt.Sprintf(format, args...)}
}

// ValidateDescription checks what describe declared.
func ValidateDescription(d sdk.Description) error {
	if d.APIVersion != sdk.APIVersion || d.Kind != sdk.KindDescribeResponse {
		return invalid("returned %s %s, want %s %s; rebuild the module with the SDK of this CCM", d.APIVersion, d.Kind, sdk.APIVersion, sdk.KindDescribeResponse)
	}
	if d.Name == "" {
		return invalid("declared no name; set sdk.Module.Name")
	}
	seen := map[string]bool{}
	for _, k := range d.Emits {
		if k.APIVersion == "" || k.Kind == "" {
			return invalid("declares an emitted kind without apiVersion or kind")
		}
		if k.Namespace != "" {
			if err := kubenames.ValidateDNS1123Label(k.Namespace); err != nil {
				return invalid("declares %s in namespace %q, which is not a valid namespace name", k.Kind, k.Namespace)
			}
		}
		key := k.APIVersion + "/" + k.Kind
		if seen[key] {
			return invalid("declares %s %s twice; declare each kind once", k.APIVersion, k.Kind)
		}
		seen[key] = true
	}
	if err := checkScopes(d); err != nil {
		return err
	}
	for _, r := range d.Reads {
		if r.APIVersion == "" || r.Kind == "" {
			return invalid("asks to read objects without apiVersion or kind")
		}
		if r.Name == "" && r.Namespace == "" && r.LabelSelector == "" {
			return invalid("asks to read every %s in the cluster; name the object, a namespace or a label selector", r.Kind)
		}
		if r.LabelSelector != "" {
			if err := kubenames.ValidateSelector(r.LabelSelector); err != nil {
				return invalid("asks to read %s with the label selector %q, which does not parse: %v", r.Kind, r.LabelSelector, err)
			}
		}
	}
	return nil
}

// ValidateOutput checks a generate response against the module's
// declaration and its request: only declared kinds, in their declared
// namespace; well-formed metadata; no duplicates; no status; the ownership
// label left to the host; node annotations only if declared, only on nodes
// of the request, and never over the BGP annotations the core writes. And
// each object as the API server will check it when the CCM applies it:
// against the schema of its kind (the built-in kinds modules write, v1
// ConfigMap and Secret, and MetalLB's CRDs; unknown fields refused, as the
// CCM applies with fieldValidation=Strict) and the API server's size
// limits, so that a module never gets half applied (see
// sdk/internal/schema).
func ValidateOutput(d sdk.Description, req sdk.GenerateRequest, resp sdk.GenerateResponse) error {
	return validateOutput(d, req, resp, true)
}

// validateOutput is ValidateOutput; withSchemas false leaves out the
// checks against schemas and size limits, which depend on the objects
// alone: Generate skips them for output it already checked (see there).
func validateOutput(d sdk.Description, req sdk.GenerateRequest, resp sdk.GenerateResponse, withSchemas bool) error {
	if resp.APIVersion != sdk.APIVersion || resp.Kind != sdk.KindGenerateResponse {
		return invalid("returned %s %s, want %s %s; rebuild the module with the SDK of this CCM", resp.APIVersion, resp.Kind, sdk.APIVersion, sdk.KindGenerateResponse)
	}
	emits := map[string]sdk.ObjectKind{}
	for _, k := range d.Emits {
		emits[k.APIVersion+"/"+k.Kind] = k
	}
	// Objects are told apart by apiVersion, kind, namespace and name as a
	// struct key, and the messages' "<kind> <namespace>/<name>" is a plain
	// concatenation: a Sprintf per object was a tenth of the validation.
	type objectID struct{ av, kind, ns, name string }
	seen := make(map[objectID]bool, len(resp.Objects))
	var checker schema.Checker
	for i, o := range resp.Objects {
		av, kind := o.APIVersion(), o.Kind()
		if av == "" || kind == "" {
			return invalid("returned object %d without apiVersion or kind", i)
		}
		md, ok := o["metadata"].(map[string]any)
		if !ok {
			return invalid("returned %s %d without metadata", kind, i)
		}
		name := o.Name()
		if err := kubenames.ValidateDNS1123Subdomain(name); err != nil {
			return invalid("returned %s %q, whose name is invalid: %v", kind, name, err)
		}
		ns := o.Namespace()
		id := kind + " " + qualified(ns, name)
		k, ok := emits[av+"/"+kind]
		if !ok {
			return forbidden("emitted %s (%s), a kind it did not declare in describe", id, av)
		}
		switch {
		case k.Namespace == "" && ns != "":
			return forbidden("emitted %s in a namespace, but declared %s cluster-scoped", id, kind)
		case k.Namespace != "" && ns != k.Namespace:
			return forbidden("emitted %s outside its declared namespace %q", id, k.Namespace)
		}
		for key := range md {
			switch key {
			case "name", "namespace", "labels", "annotations":
			default:
				return invalid("returned %s with metadata.%s; a module may set only name, namespace, labels and annotations", id, key)
			}
		}
		if _, ok := o["status"]; ok {
			return invalid("returned %s with a status; a module declares desired state only", id)
		}
		if err := validateStringMap(md["labels"], true); err != nil {
			return invalid("returned %s with invalid labels: %v", id, err)
		}
		if l := o.Labels(); l[sdk.OwnedLabel] != "" {
			return forbidden("returned %s with the label %s, which only the host sets", id, sdk.OwnedLabel)
		}
		if err := validateStringMap(md["annotations"], false); err != nil {
			return invalid("returned %s with invalid annotations: %v", id, err)
		}
		key := objectID{av, kind, ns, name}
		if seen[key] {
			return invalid("returned %s twice", id)
		}
		seen[key] = true
		if withSchemas {
			if err := checker.Check(av, kind, o); err != nil {
				return invalid("returned %s: %v; the API server would refuse it", id, err)
			}
		}
	}

	if len(resp.NodeAnnotations) > 0 && !d.NodeAnnotations {
		return forbidden("returned node annotations without declaring nodeAnnotations in describe")
	}
	nodes := map[string]bool{}
	for _, n := range req.Nodes {
		nodes[n.Name] = true
	}
	nodeNames := make([]string, 0, len(resp.NodeAnnotations))
	for n := range resp.NodeAnnotations {
		nodeNames = append(nodeNames, n)
	}
	sort.Strings(nodeNames)
	for _, n := range nodeNames {
		if !nodes[n] {
			return forbidden("returned annotations for node %q, which is not a BGP node of the request", n)
		}
		for k, v := range resp.NodeAnnotations[n] {
			if err := kubenames.ValidateQualifiedName(k); err != nil {
				return invalid("returned the node annotation %q on %s, which is not a valid name: %v", k, n, err)
			}
			if len(v) > 64<<10 {
				return invalid("returned the node annotation %s on %s longer than 64 KiB", k, n)
			}
			if req.Annotations.IsCoreAnnotation(k) {
				return forbidden("returned the node annotation %s on %s, which the CCM core writes (BGP peer data)", k, n)
			}
		}
	}
	return nil
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func validateStringMap(v any, isLabels bool) error {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("not a map of strings")
	}
	// In key order, so that of several bad entries the error names the
	// same one every time; a map of one entry needs no sorting.
	var buf [4]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		sort.Strings(keys)
	}
	for _, k := range keys {
		s, ok := m[k].(string)
		if !ok {
			return fmt.Errorf("%s is not a string", k)
		}
		if err := kubenames.ValidateQualifiedName(k); err != nil {
			return fmt.Errorf("key %q: %v", k, err)
		}
		if isLabels {
			if err := kubenames.ValidateLabelValue(s); err != nil {
				return fmt.Errorf("value of %s: %v", k, err)
			}
		}
	}
	return nil
}
