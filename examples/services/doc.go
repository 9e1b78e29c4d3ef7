// Package services holds sample LoadBalancer Services (the YAML files next
// to this file) for trying the CCM in the sandbox or a cluster:
//
//	kubectl apply -f examples/services/
//
// The package has no code; its test decodes every manifest strictly into
// the Kubernetes API types so the samples cannot rot.
package services
