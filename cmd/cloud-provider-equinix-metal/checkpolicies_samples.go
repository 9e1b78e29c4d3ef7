package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/policy"
)

// Loading a policy proves that it compiles and defines the rules the CCM
// queries, not that their values have the type the CCM reads: a placement
// rule that yields a string loads, and then every new Service fails. So
// check-policies also asks each decision on a few inputs shaped like the
// CCM's and checks the answers against the contract, as the CCM would.

// sampleNodes are a small cluster in two metros: one control-plane node and
// two workers, labelled as the CCM labels them.
func sampleNodes() []policy.Node {
	node := func(name, metro string, controlPlane bool) policy.Node {
		labels := map[string]string{corev1.LabelTopologyRegion: metro, corev1.LabelHostname: name}
		if controlPlane {
			labels["node-role.kubernetes.io/control-plane"] = ""
		}
		return policy.Node{Name: name, Labels: labels, ProviderID: "equinixmetal://00000000-0000-0000-0000-00000000000" + name[len(name)-1:], Metro: metro}
	}
	return []policy.Node{node("cp-1", "da", true), node("worker-1", "da", false), node("worker-2", "sv", false)}
}

// samplePlacements are the placement inputs asked: a plain Service with
// the global metro set, one that names its metro by annotation (the
// upstream default annotation names), and the IPv6 address of a
// dual-stack Service.
func samplePlacements() map[string]policy.PlacementInput {
	const metroAnnotation, facilityAnnotation = "metal.equinix.com/eip-metro", "metal.equinix.com/eip-facility"
	svc := func(annotations map[string]string) *corev1.Service {
		s := &corev1.Service{}
		s.Namespace, s.Name, s.Annotations = "default", "web", annotations
		return s
	}
	in := func(s *corev1.Service, family, metro string) policy.PlacementInput {
		return policy.PlacementInput{
			Service: policy.ServiceFromKubernetes(s), Family: family, Nodes: sampleNodes(),
			Config: policy.PlacementConfig{Metro: metro, AnnotationEIPMetro: metroAnnotation, AnnotationEIPFacility: facilityAnnotation},
		}
	}
	return map[string]policy.PlacementInput{
		"a Service, metro da configured":                 in(svc(nil), "IPv4", "da"),
		"a Service annotated " + metroAnnotation + "=sv": in(svc(map[string]string{metroAnnotation: "sv"}), "IPv4", ""),
		"the IPv6 address of a dual-stack Service":       in(svc(nil), "IPv6", "da"),
	}
}

// sampleProblems asks every decision on the sample inputs and returns one
// line per broken answer. A denial is the policy's to make and is not a
// problem; an undefined, mistyped or failing decision is.
func sampleProblems(ctx context.Context, e *policy.Engine) []string {
	var problems []string
	check := func(input string, err error) {
		if err != nil && !policy.Denied(err) {
			problems = append(problems, fmt.Sprintf("on %s: %v", input, err))
		}
	}
	placements := samplePlacements()
	for _, name := range slices.Sorted(maps.Keys(placements)) {
		_, err := e.Placement(ctx, placements[name])
		check(name, err)
	}
	_, err := e.SelectNodes(ctx, policy.SelectionInput{Nodes: sampleNodes()})
	check("the BGP selection of 3 nodes (cp-1, worker-1 in da; worker-2 in sv)", err)
	return problems
}
