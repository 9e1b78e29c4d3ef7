package provider

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/informertrim"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// byService indexes EndpointSlices by "<namespace>/<service>", so a
// Service's ready nodes are read from its own slices, never from a scan of
// the cluster's.
const byService = "service"

// localEndpoints is where the NoAnnouncingNode check (lbmodule.NewAnnouncements)
// reads the nodes of a Service's ready endpoints: an informer of every
// EndpointSlice, trimmed to node names and readiness
// (informertrim.EndpointSlice), indexed by Service.
//
// It needs list and watch of EndpointSlices in all namespaces, which the
// CCM's RBAC in deploy/ grants; a CCM installed with an older RBAC (or
// upstream's) asks the API server first and, without the rights, runs
// without the check and says so once, instead of failing a watch forever.
type localEndpoints struct {
	kube kubernetes.Interface
	inf  cache.SharedIndexInformer
	// changed is told a Service's slices changed (once the informer has
	// synced); synced, once, when the whole index is there. Both are set
	// before run.
	changed func(namespace, name string)
	synced  func()
}

func newLocalEndpoints(kube kubernetes.Interface) *localEndpoints {
	e := &localEndpoints{kube: kube}
	e.inf = discoveryinformers.NewEndpointSliceInformer(kube, metav1.NamespaceAll, 0, cache.Indexers{byService: serviceOfSlice})
	_ = e.inf.SetTransform(informertrim.EndpointSlice) // before Run, so it cannot fail
	notify := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		s, ok := obj.(*discoveryv1.EndpointSlice)
		// Before the sync, the index is partial: a Service with two slices
		// would be judged on one. The sync triggers a check of all.
		if !ok || !e.inf.HasSynced() {
			return
		}
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
			e.changed(s.Namespace, name)
		}
	}
	_, _ = e.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	})
	return e
}

// serviceOfSlice is the byService index function.
func serviceOfSlice(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		return []string{s.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// readyNodes are the nodes of the Service's ready endpoints; nil until the
// informer has synced (nothing is decided on a partial index).
func (e *localEndpoints) readyNodes(namespace, name string) []string {
	if !e.inf.HasSynced() {
		return nil
	}
	objs, _ := e.inf.GetIndexer().ByIndex(byService, namespace+"/"+name)
	slices := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			slices = append(slices, s)
		}
	}
	return lbsnapshot.ReadyNodes(slices)
}

// run starts the informer if the CCM may list and watch EndpointSlices in
// all namespaces, and tells synced once it has.
func (e *localEndpoints) run(ctx context.Context) {
	missing := retry(ctx, "asking the API server whether the CCM may watch EndpointSlices", func() (string, error) {
		return missingEndpointSliceRights(ctx, e.kube)
	})
	if ctx.Err() != nil {
		return
	}
	if missing != "" {
		klog.InfoS("NoAnnouncingNode Events are off: the CCM may not "+missing+" EndpointSlices in all namespaces; add the rule {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]} to its ClusterRole (deploy/ has it) and restart it", "reason", "RBAC")
		return
	}
	go e.inf.Run(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), e.inf.HasSynced) {
		e.synced()
	}
}

// missingEndpointSliceRights names the verbs (list, watch) the CCM may not
// use on EndpointSlices in all namespaces, "" when it may use both. A
// SelfSubjectAccessReview is allowed to every authenticated user.
func missingEndpointSliceRights(ctx context.Context, kube kubernetes.Interface) (string, error) {
	missing := ""
	for _, verb := range []string{"list", "watch"} {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: discoveryv1.GroupName, Resource: "endpointslices", Verb: verb,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("SelfSubjectAccessReview of %s endpointslices: %w", verb, err)
		}
		if !r.Status.Allowed {
			if missing != "" {
				missing += " and "
			}
			missing += verb
		}
	}
	return missing, nil
}
