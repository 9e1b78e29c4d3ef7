//go:build linux

package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// kubeProxyConfig: iptables mode in the node's netns.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: {{kubeconfig}}
hostnameOverride: {{name}}
bindAddress: {{ip}}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: {{clustercidr}}
# No CAP_SYS_RESOURCE (see the package documentation).
oomScoreAdj: 0
# nf_conntrack_max is the machine's, read-only from a netns: leave the
# conntrack table and its timeouts alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// startControllers runs kube-controller-manager on the host with the
// controllers a Service needs (EndpointSlices for kube-proxy) and none of
// the cloud ones (this project's CCM is what a later phase runs), and
// kube-scheduler if asked.
func (c *Cluster) startControllers(assets string, scheduler bool) error {
	cg := c.cgroupTop + "/control"
	if err := makeCgroup(cg); err != nil {
		return err
	}
	caFile := filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(caFile, c.Env.Config.CAData, 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	var err error
	c.kcm, err = startInNS("kube-controller-manager", "", cg, filepath.Join(assets, "kube-controller-manager"),
		filepath.Join(c.Dir, "kube-controller-manager.log"), []string{
			"--kubeconfig=" + c.Env.KubeconfigPath,
			"--leader-elect=false",
			"--secure-port=0",
			"--controllers=" + kcmControllers,
			// kube-root-ca.crt in every namespace: how pods (the CCM,
			// MetalLB) check kube-apiserver's certificate.
			"--root-ca-file=" + caFile,
			"--v=2",
		})
	if err != nil {
		return err
	}
	if scheduler {
		c.scheduler, err = startInNS("kube-scheduler", "", cg, filepath.Join(assets, "kube-scheduler"),
			filepath.Join(c.Dir, "kube-scheduler.log"), []string{
				"--kubeconfig=" + c.Env.KubeconfigPath,
				"--leader-elect=false",
				"--secure-port=0",
			})
	}
	return err
}

// kcmControllers: what Services and garbage collection need, and the node
// lifecycle controller: kube-apiserver's TaintNodesByCondition admission
// taints every new Node node.kubernetes.io/not-ready:NoSchedule, and only
// that controller takes the taint off once the Node is Ready (without it
// the scheduler places nothing). Nothing that acts as a cloud provider (this
// project's CCM is for a later phase), no pod CIDRs (the node ranges are
// fixed here), no taint-based eviction.
const kcmControllers = "node-lifecycle-controller,endpointslice-controller,endpointslice-mirroring-controller,endpoints-controller,garbage-collector-controller,namespace-controller,serviceaccount-controller,replicaset-controller,deployment-controller," +
	"daemonset-controller,replicationcontroller-controller,root-ca-certificate-publisher-controller,disruption-controller,job-controller,statefulset-controller"

func (c *Cluster) startKubeProxy(n *Node, kubeconfig, assets string) error {
	cfg := filepath.Join(n.Dir, "kube-proxy.yaml")
	// A dual-stack cluster's kube-proxy runs both families (it does when
	// the node has ip6tables); the pods' IPv6 range tells it which
	// sources are local.
	cidr := podNet
	if c.DualStack {
		cidr += "," + podNet6
	}
	data := fill(kubeProxyConfig, "kubeconfig", kubeconfig, "name", n.Name, "ip", n.IP, "clustercidr", cidr)
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// kube-proxy exits when its Node's addresses change, for its
	// DaemonSet to start it again with the new ones; here a loop does, as
	// the CCM adds addresses when it initialises the Node.
	// The shell waits until it is in the node's cgroup (startInNS moves
	// it there once it runs): a kube-proxy forked before would stay
	// outside it, and the cluster's Stop, which kills the shell and
	// sweeps the cgroups, would leave that kube-proxy running.
	loop := fmt.Sprintf("until grep -qF %q /proc/$$/cgroup; do sleep 0.1; done; while true; do %s --config=%s --v=2; echo kube-proxy exited: $?, starting it again; sleep 1; done",
		n.runtimeCG, filepath.Join(assets, "kube-proxy"), cfg)
	var err error
	n.kubeProxy, err = startInNS(n.Name+" kube-proxy", n.NetNS, n.runtimeCG, "/bin/sh",
		filepath.Join(n.Dir, "kube-proxy.log"), []string{"-c", loop})
	return err
}
