package deploycheck

import (
	"context"
	"errors"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// FieldManager owns the fields Install applies.
const FieldManager = "deploy-install"

// clients are the dynamic client and the REST mapper that turn a manifest's
// kind into the resource to call.
type clients struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newClients(cfg *rest.Config) (*clients, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

func (c *clients) resourceFor(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: the API server does not serve this kind: %w", gvk.Kind, o.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			return nil, fmt.Errorf("%s %s is namespaced but the manifest names no namespace", gvk.Kind, o.GetName())
		}
		return c.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

// DryRun creates every object with server-side dry-run (nothing is stored,
// but the API server runs defaulting, validation, admission and RBAC's
// escalation checks as for a real create) and returns the objects the
// server answered with. Every failing object is reported, not just the first.
func DryRun(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	c, err := newClients(cfg)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	var errs []error
	for _, o := range objs {
		ri, err := c.resourceFor(o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got, err := ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
			continue
		}
		out = append(out, got)
	}
	return out, errors.Join(errs...)
}

// Install server-side applies objs (for real) and, when they include RBAC
// rules, waits until the API server's authorizer enforces them: RBAC reads
// Roles through an informer, so a check made right after the create could
// still see the old rules.
func Install(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	if err := Apply(ctx, cfg, objs); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return waitForRules(ctx, kube, objs)
}

// Apply server-side applies objs in order, as `kubectl apply
// --server-side --force-conflicts` would.
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	for _, o := range objs {
		ri, err := c.resourceFor(o)
		if err != nil {
			return err
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// waitForRules polls until one request per rule of every Role and
// ClusterRole in objs is allowed for the CCM's ServiceAccount.
func waitForRules(ctx context.Context, kube kubernetes.Interface, objs []*unstructured.Unstructured) error {
	var probes []testenv.APICall
	for _, o := range objs {
		var rules []rbacv1.PolicyRule
		switch o.GroupVersionKind().GroupKind() {
		case rbacv1.SchemeGroupVersion.WithKind("Role").GroupKind():
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				return err
			}
			rules = r.Rules
		case rbacv1.SchemeGroupVersion.WithKind("ClusterRole").GroupKind():
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				return err
			}
			rules = r.Rules
		}
		for _, rule := range rules {
			if len(rule.Verbs) == 0 || len(rule.Resources) == 0 || len(rule.APIGroups) == 0 {
				continue
			}
			p := testenv.APICall{Namespace: o.GetNamespace(), Verb: rule.Verbs[0], APIGroup: rule.APIGroups[0]}
			p.Resource, p.Subresource = splitResource(rule.Resources[0])
			if len(rule.ResourceNames) > 0 {
				p.Name = rule.ResourceNames[0]
			}
			probes = append(probes, p)
		}
	}
	var last []Denied
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		last, err = CheckAllowed(ctx, kube, probes)
		return err == nil && len(last) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the installed RBAC rules were not enforced in time (still denied: %v): %w", last, err)
	}
	return nil
}
