// Command cluster is what `make run-cluster` starts: a real cloud cluster
// on this machine (test/cluster: kubelets, containerd, kube-proxy, the CCM
// from its image with the chart, MetalLB's pods, two BIRD routers and a
// client netns behind them, the Equinix Metal emulator), with one sample
// LoadBalancer Service, until Ctrl-C. Root only. -dual-stack makes it
// dual-stack (MetalLB in FRR mode) and the Service RequireDualStack.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/cluster"
)

func main() {
	o := &cluster.CloudOptions{}
	flag.StringVar(&o.CCMImage, "ccm-image", os.Getenv("METAL_CCM_CLUSTER_CCM_IMAGE"), "OCI layout of the CCM's image (make cluster-image)")
	flag.StringVar(&o.MetalLBManifest, "metallb-manifest", os.Getenv("METAL_CCM_CLUSTER_METALLB_MANIFEST"), "MetalLB's metallb-native.yaml")
	flag.StringVar(&o.MetalLBBins, "metallb-bins", os.Getenv("METAL_CCM_CLUSTER_METALLB_BINS"), "directory with MetalLB's controller and speaker")
	flag.StringVar(&o.Agnhost, "agnhost", os.Getenv("METAL_CCM_CLUSTER_AGNHOST"), "agnhost binary (the sample Service's server)")
	nodes := flag.Int("nodes", 3, "nodes (node-1 is the control plane)")
	dual := flag.Bool("dual-stack", false, "a dual-stack cluster, MetalLB in FRR mode (-metallb-frr-manifest, -metallb-frr-bins, -frr), the sample Service RequireDualStack")
	frrManifest := flag.String("metallb-frr-manifest", os.Getenv("METAL_CCM_CLUSTER_METALLB_FRR_MANIFEST"), "with -dual-stack: metallb-native.yaml of the MetalLB that runs in FRR mode (>= 0.16.1)")
	frrBins := flag.String("metallb-frr-bins", os.Getenv("METAL_CCM_CLUSTER_METALLB_FRR_BINS"), "with -dual-stack: its controller and speaker")
	frr := flag.String("frr", os.Getenv("METAL_CCM_CLUSTER_FRR"), "with -dual-stack: the directory of Debian's FRR (bgpd, frr-reload.py)")
	flag.Parse()
	if *dual {
		o.DualStack, o.FRR, o.MetalLBManifest, o.MetalLBBins = true, *frr, *frrManifest, *frrBins
	}
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
	svc := cluster.LoadBalancerService("hello", "hello", corev1.ServiceExternalTrafficPolicyCluster)
	want := 1
	if o.DualStack {
		policy := corev1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy, want = &policy, 2
	}
	if _, err := c.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	ips, err := ingress(ctx, c, want)
	if err != nil {
		return fmt.Errorf("the sample Service got no Elastic IP: %w", err)
	}
	fmt.Printf(`
The cluster is up (work directory and logs: %s).

  export KUBECONFIG=%s
  kubectl get nodes -o wide; kubectl get svc hello

The sample Service default/hello has the Elastic IPs %v. From the client
behind the two BGP routers (the Internet, as far as the cluster knows):

`, c.Dir, c.KubeconfigPath(), ips)
	for _, ip := range ips {
		fmt.Printf("  nsenter --net=/run/netns/%s curl http://%s/hostname\n", c.ClientNS, net.JoinHostPort(ip, "80"))
	}
	fmt.Printf(`  nsenter --net=/run/netns/%s ip route                   # its two routers
  ip -n %s route show %s          # router 1: ECMP over the nodes that announce it

Ctrl-C stops it and removes everything.
`, c.ClientNS, c.Routers[0].Name, ips[0])
	<-ctx.Done()
	fmt.Println("stopping")
	return nil
}

// ingress waits for want addresses in the sample Service's status.
func ingress(ctx context.Context, c *cluster.Cluster, want int) ([]string, error) {
	var ips []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := c.Client.CoreV1().Services("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ips = ips[:0]
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			}
		}
		return len(ips) >= want, nil
	})
	return ips, err
}
