package provider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/clusterevent"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/policy"
)

// policyPlacer asks the placement policy where a Service's EIP goes.
type policyPlacer struct {
	engine *policy.Engine
	cfg    *config.Config
	nodes  corelisters.NodeLister
	// failures reports, once per kind, a policy that cannot be evaluated
	// at all (see placementFailed).
	failures *clusterevent.Reporter
}

// clusterWideKinds are the policy failures that are the policy's, not the
// Service's: every Service fails the same way. A denial or an undefined
// placement is about one Service and stays on it.
var clusterWideKinds = []error{policy.ErrEvaluation, policy.ErrTimeout, policy.ErrInvalidDecision}

// placementFailed reports a cluster-wide policy failure once per kind (an
// Event on the kube-system Namespace and a log line) and marks it so that
// host/eip puts no Event on the Service; other errors pass unchanged.
func (p policyPlacer) placementFailed(err error) error {
	for _, kind := range clusterWideKinds {
		if !errors.Is(err, kind) {
			continue
		}
		if p.failures != nil && p.failures.Failed(kind.Error(), err.Error()) {
			klog.ErrorS(err, "The EIP placement policy fails for every Service; reported once, retried with each Service")
		}
		return &eip.ClusterWideError{Err: err}
	}
	return err
}

func (p policyPlacer) Place(ctx context.Context, svc *v1.Service, fam v1.IPFamily) (location.Location, error) {
	nodes, err := p.nodes.List(labels.Everything())
	if err != nil {
		return location.Location{}, err
	}
	in := policy.PlacementInput{
		Service: policy.ServiceFromKubernetes(svc),
		Family:  string(fam),
		Config: policy.PlacementConfig{Metro: p.cfg.Metro, Facility: p.cfg.Facility,
			AnnotationEIPMetro: p.cfg.AnnotationEIPMetro, AnnotationEIPFacility: p.cfg.AnnotationEIPFacility},
		Nodes:           policyNodes(nodes),
		BGPNodeSelector: policy.SelectorRequirements(p.cfg.NodeSelector),
	}
	loc, err := p.engine.Placement(ctx, in)
	if err != nil {
		return loc, p.placementFailed(err)
	}
	if p.failures != nil {
		p.failures.Succeeded()
	}
	return loc, nil
}

// policySelector asks the selection policy which nodes get BGP.
type policySelector struct {
	engine *policy.Engine
	reqs   []policy.Requirement
}

func (s policySelector) SelectNodes(ctx context.Context, nodes []*v1.Node) (map[string]bool, error) {
	set, err := s.engine.SelectNodes(ctx, policy.SelectionInput{Nodes: policyNodes(nodes), BGPNodeSelector: s.reqs})
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, set.Len())
	for name := range set {
		out[name] = true
	}
	return out, nil
}

func policyNodes(nodes []*v1.Node) []policy.Node {
	out := make([]policy.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, policy.NodeFromKubernetes(n))
	}
	return out
}
