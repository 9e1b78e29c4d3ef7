package policy

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
)

// The CCM loads the policies once (dir "" = the built-ins), runs Watch in
// the background, and asks for a decision per new EIP and per node change.
func Example() {
	ctx := context.Background()
	engine, err := Load(ctx, "", Options{})
	if err != nil {
		panic(err)
	}
	go func() { _ = engine.Watch(ctx) }() // returns at once for the built-ins

	cfg := PlacementConfig{
		AnnotationEIPMetro:    "metal.equinix.com/eip-metro",
		AnnotationEIPFacility: "metal.equinix.com/eip-facility",
	}
	where, err := engine.Placement(ctx, PlacementInput{
		Service: Service{Namespace: "shop", Name: "web",
			Annotations: map[string]string{"metal.equinix.com/eip-metro": "da"}},
		Config: cfg,
	})
	fmt.Println(where, err)

	_, err = engine.Placement(ctx, PlacementInput{Service: Service{Namespace: "shop", Name: "api"}, Config: cfg})
	var deny *denyError
	fmt.Println(errors.As(err, &deny), len(deny.Messages))

	selector, _ := labels.Parse("bgp=yes") // the bgpNodeSelector setting
	nodes, err := engine.SelectNodes(ctx, SelectionInput{
		Nodes: []Node{
			{Name: "a", Labels: map[string]string{"bgp": "yes"}},
			{Name: "b", Labels: map[string]string{"bgp": "no"}},
		},
		BGPNodeSelector: SelectorRequirements(selector),
	})
	fmt.Println(nodes.UnsortedList(), err)
	// Output:
	// metro da <nil>
	// true 1
	// [a] <nil>
}
