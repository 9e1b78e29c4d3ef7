# METADATA
# title: Elastic IP placement
# description: |
#   Decides where the Elastic IP (EIP) of a Service of type LoadBalancer is
#   reserved. The CCM queries data.equinix.eip.placement and
#   data.equinix.eip.deny once per new EIP; see policies/README.md for the
#   input document.
package equinix.eip

# METADATA
# title: placement
# description: |
#   The location of the Service's EIP: {"facility": "<code>"} or
#   {"metro": "<code>"}. The order is the documented upstream one, so that
#   an operator's global setting always wins over what a Service asks for:
#   global facility, global metro, the Service's facility annotation, the
#   Service's metro annotation. Undefined when none is set (deny explains).
placement := {"facility": input.config.facility} if {
	input.config.facility != ""
} else := {"metro": input.config.metro} if {
	input.config.metro != ""
} else := {"facility": facility} if {
	facility := service_annotation(input.config.annotationEIPFacility)
} else := {"metro": metro} if {
	metro := service_annotation(input.config.annotationEIPMetro)
}

# METADATA
# title: deny
# description: |
#   Messages that stop the EIP from being reserved. The CCM shows them on an
#   Event of the Service, so each one names what to set to fix it.
deny contains msg if {
	not placement
	msg := sprintf(
		"no location for the Elastic IP of Service %s/%s: set the metro (METAL_METRO_NAME, --metal-metro) or facility (METAL_FACILITY_NAME, --metal-facility) of the CCM, or annotate the Service with %s=<metro> or %s=<facility>",
		[input.service.namespace, input.service.name, input.config.annotationEIPMetro, input.config.annotationEIPFacility],
	)
}

# METADATA
# title: service_annotation
# description: |
#   The value of the Service annotation called name; undefined when the
#   annotation is missing or empty, because an empty location is no choice.
service_annotation(name) := value if {
	value := input.service.annotations[name]
	value != ""
}
