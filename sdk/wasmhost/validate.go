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
	if err := validateObjects(d, resp.Objects, withSchemas); err != nil {
		return err
	}
	return validateNodeAnnotations(d, req, resp.NodeAnnotations)
}

// objectID tells objects apart by apiVersion, kind, namespace and name as
// a struct key, and the messages' "<kind> <namespace>/<name>" is a plain
// concatenation: a Sprintf per object was a tenth of the validation.
type objectID struct{ av, kind, ns, name string }

// validateObjects checks each object alone (validateObject), then that no
// two are the same object, then, withSchemas, each against its kind's
// schema. The first problem, in the order of the objects, is the error.
func validateObjects(d sdk.Description, objects []sdk.Object, withSchemas bool) error {
	emits := map[string]sdk.ObjectKind{}
	for _, k := range d.Emits {
		emits[k.APIVersion+"/"+k.Kind] = k
	}
	seen := make(map[objectID]bool, len(objects))
	// One checker for all the objects: it keeps its buffers between them.
	var checker schema.Checker
	for i, o := range objects {
		key, id, err := validateObject(emits, i, o)
		if err != nil {
			return err
		}
		if seen[key] {
			return invalid("returned %s twice", id)
		}
		seen[key] = true
		if withSchemas {
			if err := checker.Check(key.av, key.kind, o); err != nil {
				return invalid("returned %s: %v; the API server would refuse it", id, err)
			}
		}
	}
	return nil
}

// validateObject checks object i of the output against the kinds the
// module declared (emits, by "<apiVersion>/<kind>") and the rules of its
// metadata (validateMetadata); it returns the object's key and its name
// for messages ("<kind> <namespace>/<name>").
func validateObject(emits map[string]sdk.ObjectKind, i int, o sdk.Object) (objectID, string, error) {
	av, kind := o.APIVersion(), o.Kind()
	if av == "" || kind == "" {
		return objectID{}, "", invalid("returned object %d without apiVersion or kind", i)
	}
	md, ok := o["metadata"].(map[string]any)
	if !ok {
		return objectID{}, "", invalid("returned %s %d without metadata", kind, i)
	}
	name := o.Name()
	if err := kubenames.ValidateObjectName(av, kind, name); err != nil {
		return objectID{}, "", invalid("returned %s %q, whose name is invalid: %v", kind, name, err)
	}
	ns := o.Namespace()
	id := kind + " " + qualified(ns, name)
	k, ok := emits[av+"/"+kind]
	if !ok {
		return objectID{}, "", forbidden("emitted %s (%s), a kind it did not declare in describe", id, av)
	}
	switch {
	case k.Namespace == "" && ns != "":
		return objectID{}, "", forbidden("emitted %s in a namespace, but declared %s cluster-scoped", id, kind)
	case k.Namespace != "" && ns != k.Namespace:
		return objectID{}, "", forbidden("emitted %s outside its declared namespace %q", id, k.Namespace)
	}
	if err := validateMetadata(id, o, md); err != nil {
		return objectID{}, "", err
	}
	return objectID{av, kind, ns, name}, id, nil
}

// validateMetadata checks what a module may say of an object beyond its
// identity: only name, namespace, labels and annotations in its metadata,
// no status, well-formed labels and annotations, and not the ownership
// label, which the host sets. id names the object in messages.
func validateMetadata(id string, o sdk.Object, md map[string]any) error {
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
	return nil
}

// validateNodeAnnotations checks the output's node annotations: only if
// declared, only on nodes of the request, well-formed, and never the BGP
// annotations the core writes. Nodes go in name order, so that of several
// problems the message names the same one every time.
func validateNodeAnnotations(d sdk.Description, req sdk.GenerateRequest, anns map[string]map[string]string) error {
	if len(anns) > 0 && !d.NodeAnnotations {
		return forbidden("returned node annotations without declaring nodeAnnotations in describe")
	}
	nodes := map[string]bool{}
	for _, n := range req.Nodes {
		nodes[n.Name] = true
	}
	nodeNames := make([]string, 0, len(anns))
	for n := range anns {
		nodeNames = append(nodeNames, n)
	}
	sort.Strings(nodeNames)
	for _, n := range nodeNames {
		if !nodes[n] {
			return forbidden("returned annotations for node %q, which is not a BGP node of the request", n)
		}
		for k, v := range anns[n] {
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
