package provider

import (
	"context"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// setupModule loads the module named by the loadbalancer setting, so a bad
// path, a failed sha256 pin or an invalid module stops the CCM at start,
// and registers the loop that keeps the cluster at its output.
func (c *Cloud) setupModule(cfg *config.Config) error {
	mod, err := lbmodule.Load(context.Background(), cfg.LB, lbmodule.OptionsFromConfig(cfg))
	if err != nil {
		return err
	}
	c.hooks = append(c.hooks, func(ctx context.Context, env *runEnv) {
		dyn, err := dynamic.NewForConfig(env.restConfig)
		if err != nil {
			klog.ErrorS(err, "Load-balancer module loop not started")
			return
		}
		services := env.informers.Core().V1().Services()
		snap := &snapshotter{
			lb: cfg.LB, templates: bgp.TemplatesFrom(cfg), services: services.Lister().List,
			bgpNodes: bgpNodes(&c.bgp), budget: bgp.NewPrefixBudget(cfg.BGPMaxPrefixes, env.recorder),
		}
		rec, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{
			Module: mod, Dynamic: dyn, Kube: env.kube, Snapshot: snap.request, Recorder: env.recorder,
		})
		if err != nil {
			klog.ErrorS(err, "Load-balancer module loop not started")
			return
		}
		c.lb.dirty = rec.MarkDirty
		// A Service's address appears in its status after EnsureLoadBalancer
		// returns, so status changes must regenerate too.
		_, _ = services.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
			FilterFunc: func(obj any) bool {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				s, ok := obj.(*v1.Service)
				return ok && s.Spec.Type == v1.ServiceTypeLoadBalancer
			},
			Handler: cache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { rec.MarkDirty() },
				UpdateFunc: func(any, any) { rec.MarkDirty() },
				DeleteFunc: func(any) { rec.MarkDirty() },
			},
		})
		go rec.Run(ctx)
	})
	return nil
}

// snapshotter is the thin adapter around lbsnapshot.Build: it reads the
// Service lister and the BGP controller into an lbsnapshot.Input, and
// watches the prefix budget of the result.
type snapshotter struct {
	lb        config.LoadBalancer
	templates bgp.Templates
	services  func(labels.Selector) ([]*v1.Service, error)
	bgpNodes  func() []bgp.Node
	budget    *bgp.PrefixBudget
}

func (s *snapshotter) request(ctx context.Context) (sdk.GenerateRequest, error) {
	svcs, err := s.services(labels.Everything())
	if err != nil {
		return sdk.GenerateRequest{}, err
	}
	req := lbsnapshot.Build(lbsnapshot.Input{LB: s.lb, Templates: s.templates, Services: svcs, Nodes: s.bgpNodes()})
	s.checkPrefixes(req)
	return req, nil
}

// bgpNodes reads the BGP nodes from the controller once it runs; before
// (or without BGP) there are none.
func bgpNodes(ctl *atomic.Pointer[bgp.Controller]) func() []bgp.Node {
	return func() []bgp.Node {
		if c := ctl.Load(); c != nil {
			return c.Nodes()
		}
		return nil
	}
}

// checkPrefixes counts the distinct Service addresses every BGP node
// announces.
func (s *snapshotter) checkPrefixes(req sdk.GenerateRequest) {
	ips := map[string]bool{}
	for _, svc := range req.Services {
		for _, ip := range svc.IPs {
			ips[ip] = true
		}
	}
	names := make([]string, 0, len(req.Nodes))
	for _, n := range req.Nodes {
		names = append(names, n.Name)
	}
	s.budget.Check(len(ips), names)
}
