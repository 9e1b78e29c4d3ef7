package equinix.eip_test

import data.equinix.eip

# cfg is the CCM configuration with the default annotation names and no
# global location; each test overrides what it needs.
cfg := {
	"metro": "",
	"facility": "",
	"annotationEIPMetro": "metal.equinix.com/eip-metro",
	"annotationEIPFacility": "metal.equinix.com/eip-facility",
}

both_annotations := {
	"metal.equinix.com/eip-metro": "da",
	"metal.equinix.com/eip-facility": "da11",
}

svc(annotations) := {"namespace": "shop", "name": "web", "labels": {}, "annotations": annotations}

test_global_facility_wins_over_everything if {
	got := eip.placement with input as {
		"config": object.union(cfg, {"facility": "sv15", "metro": "sv"}),
		"service": svc(both_annotations),
	}
	got == {"facility": "sv15"}
}

test_global_metro_wins_over_annotations if {
	got := eip.placement with input as {
		"config": object.union(cfg, {"metro": "sv"}),
		"service": svc(both_annotations),
	}
	got == {"metro": "sv"}
}

test_facility_annotation_wins_over_metro_annotation if {
	got := eip.placement with input as {"config": cfg, "service": svc(both_annotations)}
	got == {"facility": "da11"}
}

test_metro_annotation if {
	got := eip.placement with input as {"config": cfg, "service": svc({"metal.equinix.com/eip-metro": "ny"})}
	got == {"metro": "ny"}
}

test_empty_annotation_is_no_choice if {
	got := eip.placement with input as {"config": cfg, "service": svc({
		"metal.equinix.com/eip-facility": "",
		"metal.equinix.com/eip-metro": "ny",
	})}
	got == {"metro": "ny"}
}

test_custom_annotation_names if {
	custom := object.union(cfg, {"annotationEIPMetro": "example.com/metro"})
	got := eip.placement with input as {"config": custom, "service": svc({
		"example.com/metro": "am",
		"metal.equinix.com/eip-metro": "ny",
	})}
	got == {"metro": "am"}
}

test_no_deny_when_placed if {
	count(eip.deny) == 0 with input as {"config": cfg, "service": svc({"metal.equinix.com/eip-metro": "ny"})}
}

test_nothing_set_is_denied_with_what_to_set if {
	doc := {"config": cfg, "service": svc({"unrelated": "x"})}
	not eip.placement with input as doc
	msgs := eip.deny with input as doc
	count(msgs) == 1
	some msg in msgs
	contains(msg, "Service shop/web")
	contains(msg, "METAL_METRO_NAME")
	contains(msg, "METAL_FACILITY_NAME")
	contains(msg, "metal.equinix.com/eip-metro=<metro>")
	contains(msg, "metal.equinix.com/eip-facility=<facility>")
}

test_missing_annotations_object_is_denied if {
	doc := {"config": cfg, "service": {"namespace": "shop", "name": "web"}}
	not eip.placement with input as doc
	count(eip.deny) == 1 with input as doc
}
