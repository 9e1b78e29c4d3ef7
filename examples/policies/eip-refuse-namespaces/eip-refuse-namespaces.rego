# No Elastic IPs for some namespaces.
#
# An addition to the default policies/eip.rego (mount both): Services in
# the namespaces listed in data.settings.eipRefusedNamespaces (the file
# refused-namespaces.json) get no Elastic IP, because every EIP costs money
# and is reachable from the Internet. Edit the JSON file to change the list.
# The package already has its METADATA in eip.rego: OPA allows it once.
package equinix.eip

# METADATA
# title: deny (refused namespace)
# description: Refuses the EIP of a Service in a listed namespace, saying who to ask.
deny contains msg if {
	input.service.namespace in data.settings.eipRefusedNamespaces
	msg := sprintf(
		"Services in namespace %q get no Elastic IP by cluster policy; use a Service of type ClusterIP or NodePort, or ask the cluster admins to remove the namespace from eipRefusedNamespaces in the policy ConfigMap",
		[input.service.namespace],
	)
}
