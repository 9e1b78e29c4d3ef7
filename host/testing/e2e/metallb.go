//go:build linux

package e2e

import "fmt"

// MetalLBNamespace is where the CCM's module writes MetalLB's objects and
// where MetalLB reads them.
const MetalLBNamespace = "metallb-system"

// StartMetalLBController runs MetalLB's controller out of cluster: it assigns
// the Services' addresses from the pools the CCM wrote. Its webhooks are off
// (no Service can reach an out-of-cluster webhook); the CRDs' own schemas
// still validate what the CCM writes.
func StartMetalLBController(bins Binaries, dir, kubeconfig string) (*Proc, error) {
	return Start(dir, "metallb-controller", bins.MetalLBController, []string{
		"--namespace=" + MetalLBNamespace, "--webhook-mode=disabled", "--disable-cert-rotation",
		"--port=7471", "--log-level=info", // 7472 on each node's address is the speakers'
	}, []string{"KUBECONFIG=" + kubeconfig})
}

// StartSpeaker runs MetalLB's speaker for one node in native BGP mode. The
// memberlist is off (it needs the speakers' Pods and a secret; MetalLB then
// treats every node as having a speaker, which is true here). Its metrics
// listen on the node's own address, so speakers do not collide.
func StartSpeaker(bins Binaries, dir, kubeconfig, node, pod, nodeIP string) (*Proc, error) {
	return Start(dir, "speaker-"+node, bins.MetalLBSpeaker, []string{
		"--namespace=" + MetalLBNamespace, "--node-name=" + node, "--pod-name=" + pod, "--host=" + nodeIP, "--port=7472",
		"--log-level=info",
	}, []string{"KUBECONFIG=" + kubeconfig, "METALLB_BGP_TYPE=native", fmt.Sprintf("METALLB_NODE_NAME=%s", node)})
}
