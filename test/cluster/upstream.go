//go:build linux

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/guide"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/upstreamfixture"
)

// installUpstream makes a cloud cluster what the upstream CCM v3.8.1
// left (CloudOptions.Upstream): no CCM runs, the nodes are initialised as
// upstream initialised them, the Elastic IPs it reserved are in the
// emulator with its tags, MetalLB runs, and upstream's Services and
// MetalLB objects (CRD mode) are in place, so MetalLB announces the
// Services' addresses and traffic flows before this CCM is installed
// (UpgradeCloud installs it).
//
// The state is the capture in o.Upstream (../shared/fixtures'
// upstream-v3.8.1/crd, copied under host/provider/testdata), mapped onto
// this cluster: what names a node (its name, private address, provider ID,
// private network) is this cluster's, the Elastic IPs' cluster= tag is
// this cluster's kube-system uid, and the Services select this test's
// pods (app=web) on LoadBalancerService's ports. Addresses, tags, object
// names, labels and the rest of the specs are upstream's as captured. The
// capture's node-0 has no node here: its BGPPeers are left out, as
// upstream removes a gone node's peers.
func (c *Cluster) installUpstream(ctx context.Context, o *CloudOptions, metallb []*unstructured.Unstructured) error {
	fx, err := upstreamfixture.Load(o.Upstream)
	if err != nil {
		return fmt.Errorf("cluster: upstream's state: %w", err)
	}
	project := c.Emu.Projects()[0].ID
	nodeIP := map[string]string{}
	for _, n := range c.Nodes {
		nodeIP[n.Name] = n.IP
		d, ok := c.Emu.DeviceByHostname(project, n.Name)
		if !ok {
			return fmt.Errorf("cluster: no device %s in the emulator", n.Name)
		}
		if err := c.initialiseAsUpstream(ctx, n, d); err != nil {
			return err
		}
	}
	ks, err := c.Client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return err
	}
	seed, err := fx.Seed(string(ks.UID))
	if err != nil {
		return err
	}
	for _, r := range seed.Reservations {
		r.Project = project
		if _, err := c.Emu.AddReservation(r); err != nil {
			return fmt.Errorf("cluster: upstream's Elastic IP %s: %w", r.Address, err)
		}
	}
	if err := deploycheck.Apply(ctx, c.Env.Config, metallb); err != nil {
		return fmt.Errorf("cluster: installing MetalLB: %w", err)
	}
	if err := c.waitMetalLB(ctx); err != nil {
		return err
	}
	// MetalLB's webhook checks its objects: only now can they be written.
	var keep []*unstructured.Unstructured
	for _, obj := range fx.Objects {
		switch obj.GetKind() {
		case "Node":
			continue
		case "Service":
			if err := pointAtWeb(obj); err != nil {
				return err
			}
		case "BGPPeer":
			host := peerHost(obj)
			ip, ok := nodeIP[host]
			if !ok {
				continue // the capture's node-0
			}
			if err := unstructured.SetNestedField(obj.Object, ip, "spec", "sourceAddress"); err != nil {
				return err
			}
		}
		keep = append(keep, obj)
	}
	fx.Objects = keep
	if err := fx.Apply(ctx, c.Env.Config); err != nil {
		return fmt.Errorf("cluster: upstream's objects: %w", err)
	}
	return nil
}

// initialiseAsUpstream does to a node what upstream v3.8.1's node
// controller did (the capture's Nodes): the provider ID, the metro and
// plan labels, the addresses, the BGP annotations of its two IPv4 peers
// (no password; no multihop annotation, which upstream never wrote) and
// the private network, and the uninitialized taint removed.
func (c *Cluster) initialiseAsUpstream(ctx context.Context, n *Node, d emulator.Device) error {
	var public, private netip.Addr
	var privateNet string
	for _, a := range d.Addresses {
		if !a.Management {
			continue
		}
		switch a.Type {
		case emulator.TypePublicIPv4:
			public = a.Address
		case emulator.TypePrivateIPv4:
			private, privateNet = a.Address, a.ReservationPrefix.Masked().String()
		}
	}
	if private.String() != n.IP {
		return fmt.Errorf("cluster: device %s has private address %s, node %s is at %s", d.ID, private, n.Name, n.IP)
	}
	notes := map[string]string{"metal.equinix.com/network-4-private": privateNet}
	// Upstream numbers the peers in the order of their IPs (as strings).
	var peers []string
	for _, r := range c.Routers {
		peers = append(peers, r.PeerIP)
	}
	sort.Strings(peers)
	for i, peer := range peers {
		p := fmt.Sprintf("metal.equinix.com/bgp-peers-%d-", i)
		maps.Copy(notes, map[string]string{p + "node-asn": fmt.Sprint(projectASN), p + "peer-asn": fmt.Sprint(PeerASN), p + "peer-ip": peer, p + "src-ip": n.IP, p + "bgp-pass": ""})
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.ProviderID = "equinixmetal://" + d.ID
		var taints []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != "node.cloudprovider.kubernetes.io/uninitialized" {
				taints = append(taints, t)
			}
		}
		node.Spec.Taints = taints
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		maps.Copy(node.Annotations, notes)
		maps.Copy(node.Labels, map[string]string{
			corev1.LabelTopologyRegion: d.Metro, "failure-domain.beta.kubernetes.io/region": d.Metro,
			corev1.LabelInstanceTypeStable: d.Plan, corev1.LabelInstanceType: d.Plan,
		})
		_, err = c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("cluster: initialising %s as upstream did: %w", n.Name, err)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: n.Name},
			{Type: corev1.NodeExternalIP, Address: public.String()},
			{Type: corev1.NodeInternalIP, Address: n.IP},
		}
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// pointAtWeb makes a captured Service select this test's pods (app=web)
// on LoadBalancerService's ports, and leaves its cluster IP and node
// ports to this apiserver; its name, annotations, finalizers,
// loadBalancerIP and status ingress stay upstream's.
func pointAtWeb(svc *unstructured.Unstructured) error {
	spec, _, _ := unstructured.NestedMap(svc.Object, "spec")
	for _, k := range []string{"clusterIP", "clusterIPs", "ports", "selector"} {
		delete(spec, k)
	}
	spec["selector"] = map[string]any{"app": "web"}
	var ports []any
	for _, p := range LoadBalancerService("x", "web", corev1.ServiceExternalTrafficPolicyCluster).Spec.Ports {
		ports = append(ports, map[string]any{"name": p.Name, "protocol": string(p.Protocol), "port": int64(p.Port), "targetPort": int64(p.TargetPort.IntVal)})
	}
	spec["ports"] = ports
	return unstructured.SetNestedMap(svc.Object, spec, "spec")
}

// peerHost is the node a captured BGPPeer is for: its first node
// selector's hostname (upstream's form; the others name no node).
func peerHost(peer *unstructured.Unstructured) string {
	sels, _, _ := unstructured.NestedSlice(peer.Object, "spec", "nodeSelectors")
	for _, s := range sels {
		m, _ := s.(map[string]any)
		labels, _ := m["matchLabels"].(map[string]any)
		if h, ok := labels[corev1.LabelHostname].(string); ok {
			return h
		}
	}
	return ""
}

// UpstreamIngress is each captured Service's ingress IP (name -> IP), read
// back from the cluster.
func (c *Cluster) UpstreamIngress(ctx context.Context) (map[string]string, error) {
	svcs, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range svcs.Items {
		if strings.HasPrefix(s.Name, "svc-") && len(s.Status.LoadBalancer.Ingress) > 0 {
			out[s.Name] = s.Status.LoadBalancer.Ingress[0].IP
		}
	}
	return out, nil
}

// UpstreamRelease is the name of the Helm release of upstream's chart in
// a cluster that started as upstream left it: not the chart's name, so
// upstream's chart names its objects <release>-<chart> and the guide
// must find them from the release.
const UpstreamRelease = "metal-ccm"

// upstreamChart is upstream's own chart as published at v3.8.1 (the
// shared fixture's copy under host/provider/testdata).
func upstreamChart() string {
	return filepath.Join(filepath.Dir(filepath.Dir(chartDir())), "host", "provider", "testdata", "upstream-v3.8.1", "chart", "cloud-provider-equinix-metal")
}

// InstallUpstreamRelease installs upstream's chart as a user of it did,
// with Helm (client-side, as Helm 3 did), as the release UpstreamRelease
// in CCMNamespace: its image pinned to v3.8.1 and its config this
// cluster's (the emulator, the metro, the control-plane EIP tag, MetalLB
// in CRD mode). Upstream's image is not on this machine, so its DaemonSet's
// pods never start: the leftovers installUpstream put in place stand for
// what upstream did while it ran.
func (c *Cluster) InstallUpstreamRelease(ctx context.Context) error {
	ch, err := deploycheck.LoadChart(upstreamChart())
	if err != nil {
		return fmt.Errorf("cluster: upstream's chart: %w", err)
	}
	config := c.clusterConfig()
	config["loadbalancer"] = "metallb:///" + metallbNamespace + "?crdConfiguration=true"
	values := map[string]any{"image": map[string]any{"tag": "v3.8.1"}, "config": config}
	cfg, err := guide.HelmConfig(c.Env.KubeconfigPath, CCMNamespace)
	if err != nil {
		return err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.WaitStrategy = UpstreamRelease, CCMNamespace, kube.HookOnlyStrategy
	install.ServerSideApply = false
	if _, err := install.RunWithContext(ctx, ch, values); err != nil {
		return fmt.Errorf("cluster: helm install of upstream's chart: %w", err)
	}
	return nil
}

// PublishedChart is what the guide's bin/deploy/chart is: this
// repository's chart naming the image make image built (here, the image
// imported into the nodes).
func PublishedChart() (*chartv2.Chart, error) {
	ch, err := deploycheck.LoadChart(chartDir())
	if err != nil {
		return nil, err
	}
	repo, tag, _ := strings.Cut(CCMImage, ":")
	img, _ := ch.Values["image"].(map[string]any)
	img = maps.Clone(img)
	img["repository"], img["tag"] = repo, tag
	ch.Values["image"] = img
	return ch, nil
}

// UpstreamManifest writes, into dir, upstream v3.8.1's kubectl install (the
// deployment.yaml its README applies) and returns its path. That release
// asset is not in the fixtures, so it is rebuilt from upstream's own chart
// (the fixture), rendered as release cloud-provider-equinix-metal in
// kube-system, with the differences the v3.8.1 tag's deploy/template
// shows: the ClusterRole and its binding are named
// cloud-provider-equinix-metal (the chart's are system:cloud-controller-manager),
// the DaemonSet mounts the Secret metal-cloud-config that the README has
// the user create, the manifest holds no Secret, no object carries Helm's
// labels, and the DaemonSet has no spec.strategy.
//
// The chart refuses to render without its config (it fails on an empty
// API key), so config is given, though the Secret it goes into is dropped.
func UpstreamManifest(dir string, config map[string]any) (string, error) {
	ch, err := deploycheck.LoadChart(upstreamChart())
	if err != nil {
		return "", fmt.Errorf("cluster: upstream's chart: %w", err)
	}
	objs, err := deploycheck.RenderChart(ch, map[string]any{"image": map[string]any{"tag": "v3.8.1"}, "config": config}, CCMNamespace)
	if err != nil {
		return "", fmt.Errorf("cluster: upstream's chart: %w", err)
	}
	const name = "cloud-provider-equinix-metal"
	var docs []string
	for _, o := range objs {
		labels := o.GetLabels()
		delete(labels, "helm.sh/chart")
		delete(labels, "app.kubernetes.io/managed-by")
		o.SetLabels(labels)
		switch o.GetKind() {
		case "Secret":
			continue
		case "ClusterRole":
			o.SetName(name)
		case "ClusterRoleBinding":
			o.SetName(name)
			if err := unstructured.SetNestedField(o.Object, name, "roleRef", "name"); err != nil {
				return "", err
			}
		case "DaemonSet":
			// The chart's DaemonSet has a Deployment's strategy, which
			// Helm sends anyway and kubectl's strict validation refuses;
			// the tag's template has none.
			unstructured.RemoveNestedField(o.Object, "spec", "strategy")
			vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if s, ok := v.(map[string]any)["secret"].(map[string]any); ok {
					s["secretName"] = upstreamSecret
				}
			}
			if err := unstructured.SetNestedSlice(o.Object, vols, "spec", "template", "spec", "volumes"); err != nil {
				return "", err
			}
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return "", err
		}
		docs = append(docs, string(b))
	}
	path := filepath.Join(dir, "upstream-v3.8.1-deployment.yaml")
	return path, os.WriteFile(path, []byte("---\n"+strings.Join(docs, "---\n")), 0o644)
}

// upstreamSecret is the Secret upstream's README has its kubectl users
// create, holding cloud-sa.json.
const upstreamSecret = "metal-cloud-config"

// InstallUpstreamManifest installs upstream as its README's kubectl path
// does: the Secret metal-cloud-config with this cluster's config (MetalLB
// in CRD mode), then `kubectl apply -f` of upstream's manifest
// (UpstreamManifest, written into the cluster's directory; its path is
// returned for the guide's rollback). As with the Helm release, the
// DaemonSet's pods never start: upstream's image is not on this machine.
func (c *Cluster) InstallUpstreamManifest(ctx context.Context, kubectl string) (string, error) {
	config := c.clusterConfig()
	config["loadbalancer"] = "metallb:///" + metallbNamespace + "?crdConfiguration=true"
	sa, err := json.Marshal(config)
	if err != nil {
		return "", err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: upstreamSecret, Namespace: CCMNamespace},
		StringData: map[string]string{"cloud-sa.json": string(sa)}}
	if _, err := c.Client.CoreV1().Secrets(CCMNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("cluster: upstream's Secret: %w", err)
	}
	path, err := UpstreamManifest(c.Dir, config)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, kubectl, "apply", "-f", path)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cluster: kubectl apply -f upstream's manifest: %w\n%s", err, out)
	}
	return path, nil
}
