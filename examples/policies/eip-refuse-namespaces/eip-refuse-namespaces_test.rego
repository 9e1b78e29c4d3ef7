package equinix.eip_refuse_namespaces_test

import data.equinix.eip

cfg := {
	"metro": "da",
	"facility": "",
	"annotationEIPMetro": "metal.equinix.com/eip-metro",
	"annotationEIPFacility": "metal.equinix.com/eip-facility",
}

svc(namespace) := {"namespace": namespace, "name": "web", "labels": {}, "annotations": {}}

test_refused_namespace_is_denied if {
	msgs := eip.deny with input as {"service": svc("sandbox"), "config": cfg}
	count(msgs) == 1
	some msg in msgs
	contains(msg, `namespace "sandbox"`)
}

test_other_namespace_is_placed if {
	doc := {"service": svc("shop"), "config": cfg}
	count(eip.deny) == 0 with input as doc
	eip.placement == {"metro": "da"} with input as doc
}

test_list_comes_from_data if {
	count(eip.deny) == 0 with input as {"service": svc("sandbox"), "config": cfg}
		with data.settings.eipRefusedNamespaces as ["other"]
}
