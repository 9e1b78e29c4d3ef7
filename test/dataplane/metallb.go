package dataplane

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

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

// StartSpeaker runs MetalLB's speaker for one node in native BGP mode, or,
// with frr, in FRR mode driving that FRR. The memberlist is off (it needs
// the speakers' Pods and a secret; MetalLB then treats every node as having
// a speaker, which is true here). Its metrics listen on the node's own
// address, so speakers do not collide; MetalLB 0.16 (FRR mode here) listens
// on every address instead, so each of its speakers gets ports of its own.
func StartSpeaker(bins Binaries, dir, kubeconfig, node, pod, nodeIP string, frr *FRR) (*Proc, error) {
	env := []string{"KUBECONFIG=" + kubeconfig, "METALLB_BGP_TYPE=native", fmt.Sprintf("METALLB_NODE_NAME=%s", node)}
	args := []string{"--namespace=" + MetalLBNamespace, "--node-name=" + node, "--pod-name=" + pod, "--host=" + nodeIP, "--port=7472", "--log-level=info"}
	if frr != nil {
		// Later entries win: METALLB_BGP_TYPE and --port.
		env = append(env, frr.SpeakerEnv()...)
		args = append(args, frr.SpeakerArgs()...)
	}
	return Start(dir, "speaker-"+node, bins.MetalLBSpeaker, args, env)
}

// StartLegacyController runs MetalLB 0.12's controller, which reads its
// pools from the legacy ConfigMap. EndpointSlice discovery is off: 0.12
// knows only discovery/v1beta1, which kube-apiserver 1.37 no longer serves.
func StartLegacyController(bins Binaries, dir, kubeconfig, configMap string) (*Proc, error) {
	return Start(dir, "metallb-legacy-controller", bins.LegacyController, []string{
		"--kubeconfig=" + kubeconfig, "--namespace=" + MetalLBNamespace, "--config=" + configMap,
		"--port=7471", "--disable-epslices", "--log-level=info",
	}, nil)
}

// StartLegacySpeaker runs MetalLB 0.12's speaker for one node, reading its
// peers from the legacy ConfigMap.
func StartLegacySpeaker(bins Binaries, dir, kubeconfig, configMap, node, nodeIP string) (*Proc, error) {
	return Start(dir, "speaker-legacy-"+node, bins.LegacySpeaker, []string{
		"--kubeconfig=" + kubeconfig, "--namespace=" + MetalLBNamespace, "--config=" + configMap,
		"--node-name=" + node, "--host=" + nodeIP, "--port=7472", "--disable-epslices", "--log-level=info",
	}, nil)
}

// SpeakerPod is the name of the node's speaker Pod.
func SpeakerPod(node string) string { return "speaker-" + node }

// StartNodeSpeaker creates the node's speaker Pod, as MetalLB's DaemonSet
// and the scheduler would (the speaker reads its own Pod, the owner of its
// status objects), and runs the speaker for it (frr as StartSpeaker's).
func StartNodeSpeaker(ctx context.Context, kube kubernetes.Interface, bins Binaries, dir, kubeconfig, node, nodeIP string, frr *FRR) (*Proc, error) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: MetalLBNamespace, Name: SpeakerPod(node), Labels: map[string]string{"app": "metallb", "component": "speaker"}},
		Spec: v1.PodSpec{NodeName: node, HostNetwork: true, Containers: []v1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker:v0.15.3"}}}}
	if _, err := kube.CoreV1().Pods(MetalLBNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return StartSpeaker(bins, dir, kubeconfig, node, SpeakerPod(node), nodeIP, frr)
}
