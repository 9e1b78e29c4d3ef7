package equinix.eip_majority_test

import data.equinix.eip

cfg := {
	"metro": "",
	"facility": "",
	"annotationEIPMetro": "metal.equinix.com/eip-metro",
	"annotationEIPFacility": "metal.equinix.com/eip-facility",
}

svc := {"namespace": "shop", "name": "web", "labels": {}, "annotations": {}}

node(name, metro, labels) := {"name": name, "metro": metro, "facility": "", "providerID": "", "labels": labels}

# Two BGP nodes in da, one in ny; sv has three nodes but none does BGP.
nodes := [
	node("a", "da", {"bgp": "yes"}),
	node("b", "da", {"bgp": "yes"}),
	node("c", "ny", {"bgp": "yes"}),
	node("d", "sv", {}),
	node("e", "sv", {}),
	node("f", "sv", {}),
	node("g", "", {"bgp": "yes"}),
]

bgp_only := [{"key": "bgp", "operator": "=", "values": ["yes"]}]

test_metro_of_most_bgp_nodes if {
	got := eip.placement with input as {"service": svc, "config": cfg, "nodes": nodes, "bgpNodeSelector": bgp_only}
	got == {"metro": "da"}
}

test_every_node_does_bgp_without_selector if {
	got := eip.placement with input as {"service": svc, "config": cfg, "nodes": nodes, "bgpNodeSelector": []}
	got == {"metro": "sv"}
}

test_tie_picks_alphabetically_first if {
	tied := [node("x", "ny", {}), node("y", "am", {})]
	got := eip.placement with input as {"service": svc, "config": cfg, "nodes": tied, "bgpNodeSelector": []}
	got == {"metro": "am"}
}

test_settings_and_annotations_still_win if {
	base := {"service": svc, "config": cfg, "nodes": nodes, "bgpNodeSelector": bgp_only}
	eip.placement == {"facility": "da11"} with input as object.union(base, {"config": object.union(cfg, {"facility": "da11"})})
	eip.placement == {"metro": "ny"} with input as object.union(base, {"config": object.union(cfg, {"metro": "ny"})})
	eip.placement == {"facility": "sv15"} with input as object.union(base, {"service": object.union(svc, {"annotations": {"metal.equinix.com/eip-facility": "sv15"}})})
	eip.placement == {"metro": "sv"} with input as object.union(base, {"service": object.union(svc, {"annotations": {"metal.equinix.com/eip-metro": "sv"}})})
}

test_no_bgp_node_with_a_metro_is_denied if {
	doc := {"service": svc, "config": cfg, "nodes": [node("g", "", {})], "bgpNodeSelector": []}
	not eip.placement with input as doc
	msgs := eip.deny with input as doc
	count(msgs) == 1
	some msg in msgs
	contains(msg, "Service shop/web")
	contains(msg, "no BGP node has a known metro")
}

test_no_deny_when_placed if {
	count(eip.deny) == 0 with input as {"service": svc, "config": cfg, "nodes": nodes, "bgpNodeSelector": []}
}
