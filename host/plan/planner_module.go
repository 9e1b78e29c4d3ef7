package plan

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// planModule runs the module reconciler's Plan on the Services as the sync
// would leave them and the BGP nodes found above.
func (p *Planner) planModule(ctx context.Context, ro *rest.Config, kube kubernetes.Interface, svcs []*v1.Service, nodes []lbsnapshot.Node, res *Result) error {
	dyn, err := dynamic.NewForConfig(ro)
	if err != nil {
		return err
	}
	rec, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{Module: p.LB.Module, Dynamic: dyn, Kube: kube, Snapshot: p.LB.Snapshot(svcs, nodes)})
	if err != nil {
		return err
	}
	changes, warnings, err := rec.Plan(ctx)
	if err != nil {
		return err
	}
	res.Objects = append(res.Objects, changes...)
	res.Warnings = append(res.Warnings, warnings...)
	return nil
}

// servicesAfter are the Services as a sync leaves them: those being
// released gone, and each other's status showing its address.
func servicesAfter(svcs []*v1.Service, addrs map[string][]string) []*v1.Service {
	out := make([]*v1.Service, 0, len(svcs))
	for _, s := range svcs {
		if needsCleanup(s) {
			continue
		}
		if ips, ok := addrs[id(s)]; ok && !slices.EqualFunc(ips, s.Status.LoadBalancer.Ingress, func(ip string, in v1.LoadBalancerIngress) bool { return ip == in.IP }) {
			s = s.DeepCopy()
			s.Status.LoadBalancer.Ingress = nil
			for _, ip := range ips {
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
			}
		}
		out = append(out, s)
	}
	return out
}

func inStatus(s *v1.Service, ip string) bool {
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP == ip {
			return true
		}
	}
	return false
}
