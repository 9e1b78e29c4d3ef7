// Package deploy holds the Kubernetes manifests of the CCM (a kustomize base,
// one overlay per load balancer, the Secret template, and the Helm chart in
// chart/), embedded, and the names they share with the tests. Nothing here
// runs in a binary: the Go that renders and checks the manifests against a
// real kube-apiserver is test machinery (test/deploycheck: Render builds a
// kustomization exactly as `kubectl apply -k` would, RenderChart as `helm
// install` would, Install puts objects into a cluster, and CheckAllowed asks
// the API server whether the CCM's ServiceAccount may make each of a list of
// API calls).
//
// Integration tests use CheckAllowed with the calls read back from
// test/testenv's audit log, so every request the CCM makes in a test is
// proven to be allowed by these manifests, and the manifests cannot grant
// less than the code needs without a test failing.
package deploy

import "embed"

// Manifests are the kustomize files, embedded so that tests in any package
// render the same files whatever their working directory.
//
//go:embed kustomization.yaml base overlays components template
var Manifests embed.FS

const (
	// Namespace is where the CCM and its namespaced objects live.
	Namespace = "kube-system"
	// ServiceAccountName is the CCM's ServiceAccount (upstream's name).
	ServiceAccountName = "cloud-controller-manager"
	// SecretName is the Secret holding cloud-sa.json.
	SecretName = "metal-cloud-config"
	// SecretKey is the key of the cloud-config file in SecretName.
	SecretKey = "cloud-sa.json"
	// PoliciesConfigMap holds the default policies, mounted at PolicyDir.
	PoliciesConfigMap = "metal-ccm-policies"
	// PolicyDir is where the Deployment mounts the policies.
	PolicyDir = "/etc/ccm/policies"
	// SecretTemplate is the embedded path of the Secret template.
	SecretTemplate = "template/secret.yaml"
)

// ChartDir is the chart's directory relative to this package; `make
// manifests` writes a copy stamped with the build's version and image to
// bin/deploy/chart.
const ChartDir = "chart"

// ReleaseName is the release name the README's `helm install` uses.
const ReleaseName = "cloud-provider-equinix-metal"
