// Command cluster is what `make run-cluster` starts: a real cloud cluster
// on this machine (test/cluster: kubelets, containerd, kube-proxy, the CCM
// from its image with the chart, MetalLB's pods, two BIRD routers and a
// client netns behind them, the Equinix Metal emulator), with one sample
// LoadBalancer Service, until Ctrl-C. Root only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/cluster"
)

func main() {
	o := &cluster.CloudOptions{}
	flag.StringVar(&o.CCMImage, "ccm-image", os.Getenv("METAL_CCM_CLUSTER_CCM_IMAGE"), "OCI layout of the CCM's image (make cluster-image)")
	flag.StringVar(&o.MetalLBManifest, "metallb-manifest", os.Getenv("METAL_CCM_CLUSTER_METALLB_MANIFEST"), "MetalLB's metallb-native.yaml")
	flag.StringVar(&o.MetalLBBins, "metallb-bins", os.Getenv("METAL_CCM_CLUSTER_METALLB_BINS"), "directory with MetalLB's controller and speaker")
	flag.StringVar(&o.Agnhost, "agnhost", os.Getenv("METAL_CCM_CLUSTER_AGNHOST"), "agnhost binary (the sample Service's server)")
	nodes := flag.Int("nodes", 3, "nodes (node-1 is the control plane)")
	flag.Parse()
	if err := run(o, *nodes); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(1)
	}
}

func run(o *cluster.CloudOptions, nodes int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cluster.Start(ctx, cluster.Options{Cloud: o, Nodes: nodes, Timeout: 6 * time.Minute,
		Logf: func(f string, a ...any) { fmt.Printf(f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer c.Stop()
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, cluster.NetexecDeployment("hello", 2), metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Services("default").Create(ctx, cluster.LoadBalancerService("hello", "hello", corev1.ServiceExternalTrafficPolicyCluster), metav1.CreateOptions{}); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	ip, err := c.ServiceIngress(wctx, "default", "hello")
	cancel()
	if err != nil {
		return fmt.Errorf("the sample Service got no Elastic IP: %w", err)
	}
	fmt.Printf(`
The cluster is up (work directory and logs: %s).

  export KUBECONFIG=%s
  kubectl get nodes -o wide; kubectl get svc hello

The sample Service default/hello has the Elastic IP %s. From the client
behind the two BGP routers (the Internet, as far as the cluster knows):

  nsenter --net=/run/netns/%s curl http://%s/hostname
  nsenter --net=/run/netns/%s ip route                   # its two routers
  ip -n %s route show %s          # router 1: ECMP over the nodes that announce it

Ctrl-C stops it and removes everything.
`, c.Dir, c.KubeconfigPath(), ip, c.ClientNS, ip, c.ClientNS, c.Routers[0].Name, ip)
	<-ctx.Done()
	fmt.Println("stopping")
	return nil
}
