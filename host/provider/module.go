package provider

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// ReasonPrefixLimit warns that every BGP node announces more Service
// addresses than Equinix's per-session prefix limit (upstream issue #457):
// past it, the routers drop the whole session, not just the extra prefixes.
const ReasonPrefixLimit = "BGPPrefixLimitExceeded"

var (
	announcedPrefixes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "bgp", Name: "announced_prefixes",
		Help: "Service addresses each BGP node announces.", StabilityLevel: metrics.ALPHA,
	})
	prefixLimit = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "equinix_metal", Subsystem: "bgp", Name: "prefix_limit",
		Help: "Configured per-session prefix limit (bgpMaxPrefixes).", StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

// setupModule loads the module named by the loadbalancer setting, so a bad
// path, a failed sha256 pin or an invalid module stops the CCM at start,
// and registers the loop that keeps the cluster at its output.
func (c *Cloud) setupModule(cfg *config.Config) error {
	registerOnce.Do(func() { legacyregistry.MustRegister(announcedPrefixes, prefixLimit) })
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
		snap := &snapshotter{cloud: c, services: services.Lister().List, recorder: env.recorder}
		rec, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{
			Module: mod, Dynamic: dyn, Kube: env.kube, Snapshot: snap.request, Recorder: env.recorder,
		})
		if err != nil {
			klog.ErrorS(err, "Load-balancer module loop not started")
			return
		}
		c.lb.dirty = rec.MarkDirty
		c.reconciler.Store(rec)
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

// snapshotter builds the module input and watches the prefix budget.
type snapshotter struct {
	cloud    *Cloud
	services func(labels.Selector) ([]*v1.Service, error)
	recorder record.EventRecorder
	mu       sync.Mutex
	exceeded map[string]bool // nodes already warned
}

func (s *snapshotter) request(ctx context.Context) (sdk.GenerateRequest, error) {
	svcs, err := s.services(labels.Everything())
	if err != nil {
		return sdk.GenerateRequest{}, err
	}
	var nodes []bgp.Node
	if ctl := s.cloud.bgp.Load(); ctl != nil {
		nodes = ctl.Nodes()
	}
	req := buildRequest(moduleOptions(s.cloud.cfg.LB), svcs, nodes, bgp.TemplatesFrom(s.cloud.cfg))
	s.checkPrefixes(req)
	return req, nil
}

// checkPrefixes warns once per node when the Service addresses every BGP
// node announces exceed the session limit, and again if it recovers and
// exceeds anew.
func (s *snapshotter) checkPrefixes(req sdk.GenerateRequest) {
	ips := map[string]bool{}
	for _, svc := range req.Services {
		for _, ip := range svc.IPs {
			ips[ip] = true
		}
	}
	limit := s.cloud.cfg.BGPMaxPrefixes
	announcedPrefixes.Set(float64(len(ips)))
	prefixLimit.Set(float64(limit))
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ips) <= limit {
		s.exceeded = nil
		return
	}
	if s.exceeded == nil {
		s.exceeded = map[string]bool{}
	}
	for _, n := range req.Nodes {
		if s.exceeded[n.Name] {
			continue
		}
		s.exceeded[n.Name] = true
		ref := &v1.ObjectReference{Kind: "Node", Name: n.Name, UID: types.UID(n.Name)}
		s.recorder.Eventf(ref, v1.EventTypeWarning, ReasonPrefixLimit,
			"This node announces %d Service addresses over BGP, more than the session limit of %d; Equinix Metal drops sessions past the limit: ask Equinix to raise it and set bgpMaxPrefixes, or use fewer LoadBalancer Services", len(ips), limit)
	}
	klog.InfoS("BGP prefix limit exceeded", "announced", len(ips), "limit", limit)
}
