package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/plan"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/policy"
)

// Plan reports what a sync would change: host/plan's Planner runs the
// CCM's own code over its capturing layers, with the parts of this
// provider, against the cluster at restConfig and Equinix, both read-only.
// c must come from NewForPlan and is never started.
func (c *Cloud) Plan(ctx context.Context, restConfig *rest.Config) (*plan.Result, error) {
	return c.planner().Run(ctx, restConfig)
}

// planner hands the planner the provider's read-only client, its
// configuration and, with load balancing, the policies and the module as
// the running CCM uses them.
func (c *Cloud) planner() *plan.Planner {
	p := &plan.Planner{Metal: c.metal, Config: c.cfg, UserAgent: PlanUserAgent}
	if c.lb == nil {
		return p
	}
	p.LB = &plan.LoadBalancing{
		Policies: c.policies,
		Placer: func(nodes corelisters.NodeLister) eip.Placer {
			return policyPlacer{engine: c.policies, cfg: c.cfg, nodes: nodes}
		},
		Selector: policySelector{engine: c.policies, reqs: policy.SelectorRequirements(c.cfg.NodeSelector)},
		Module:   c.module.mod, // NewForPlan waited for it
		Snapshot: c.planSnapshot,
	}
	return p
}

// planSnapshot is the module's input from the snapshotter the module loop
// uses, over the Services and BGP nodes the plan found; the prefix
// budget's Events are captured and dropped.
func (c *Cloud) planSnapshot(svcs []*v1.Service, nodes []lbsnapshot.Node) lbmodule.SnapshotFunc {
	snap := &snapshotter{
		lb: c.cfg.LB, templates: lbsnapshot.TemplatesFrom(c.cfg),
		services: func(labels.Selector) ([]*v1.Service, error) { return svcs, nil },
		bgpNodes: func() []lbsnapshot.Node { return nodes },
		budget:   bgp.NewPrefixBudget(c.cfg.BGPMaxPrefixes, &plan.Recorder{}),
		// Where each address is reserved, so the plan shows the
		// announcements per metro the module would write.
		reservations: c.metal,
	}
	return snap.request
}
