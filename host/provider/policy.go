package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/policy"
)

// policyPlacer asks the placement policy where a Service's EIP goes.
type policyPlacer struct {
	engine *policy.Engine
	cfg    *config.Config
	nodes  corelisters.NodeLister
}

func (p policyPlacer) Place(ctx context.Context, svc *v1.Service) (location.Location, error) {
	nodes, err := p.nodes.List(labels.Everything())
	if err != nil {
		return location.Location{}, err
	}
	in := policy.PlacementInput{
		Service: policy.ServiceFromKubernetes(svc),
		Config: policy.PlacementConfig{Metro: p.cfg.Metro, Facility: p.cfg.Facility,
			AnnotationEIPMetro: p.cfg.AnnotationEIPMetro, AnnotationEIPFacility: p.cfg.AnnotationEIPFacility},
		Nodes:           policyNodes(nodes),
		BGPNodeSelector: policy.SelectorRequirements(p.cfg.NodeSelector),
	}
	return p.engine.Placement(ctx, in)
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
