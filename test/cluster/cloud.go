//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// CloudOptions make the cluster an Equinix Metal one: the emulator holds
// a device per node (same name, the node's address as its private IPv4),
// the kubelets run with --cloud-provider=external, the CCM is installed
// from its image with the project's Helm chart, MetalLB from its own
// manifest with images of binaries built here, and two BIRD routers at the
// peer addresses carry the client's traffic to the nodes that announce an
// address (see bgp.go).
type CloudOptions struct {
	// CCMImage is an OCI layout with the CCM's image (make image writes
	// bin/image).
	CCMImage string
	// MetalLBManifest is metallb-native.yaml of MetalLB's module, and
	// MetalLBBins the directory with its controller and speaker built from
	// the same version (make e2e-bins).
	MetalLBManifest string
	MetalLBBins     string
	// Agnhost, when set, is imported as the e2e tests' image (AgnhostImage).
	Agnhost string
	// Values are chart values merged over the ones Start sets (image,
	// config with the emulator's URL and key, loadBalancer.mode metallb).
	Values map[string]any
	// BeforeCCM runs once the emulator and the nodes are up, before the
	// chart is installed (to seed reservations, say).
	BeforeCCM func(*Cluster) error
	// FRR, when set, runs MetalLB's speakers in FRR mode (the mode that
	// announces IPv6): it is the directory of Debian's FRR (bgpd,
	// frr-reload.py), each node gets a bgpd of its own and this process
	// reloads it as MetalLB's reloader would (test/dataplane's FRR), and
	// the CCM is told bgpType=frr. MetalLBManifest and MetalLBBins must
	// then be MetalLB's >= 0.16.1 (FRR mode before it refuses the CCM's
	// per-node BGPPeers).
	FRR string
	// DualStack gives the cluster IPv6 beside IPv4 (it needs FRR): the
	// nodes' public IPv6, pods' and Services' IPv6 ranges, kube-proxy for
	// both families, and IPv6 sessions at the routers (bgp.go).
	DualStack bool
	// NoMultihop makes the emulator report every BGP neighbour with
	// multihop false, which Equinix never does: the CCM then tells no
	// speaker its peers are behind the gateway. The test that shows the
	// gateway network can fail a session.
	NoMultihop bool
	// Legacy runs MetalLB <= 0.12 (MetalLBManifest is then its
	// manifests/metallb.yaml), configured by the ConfigMap the CCM writes
	// (loadBalancer.mode metallb-legacy): what users who never moved to
	// MetalLB's CRs run.
	Legacy bool
	// KubeVIP, when set, is a kube-vip binary: kube-vip (kubevip.go), not
	// MetalLB, announces the Services, reading its BGP settings from the
	// node annotations the CCM writes (loadBalancer.mode kube-vip).
	// MetalLBManifest and MetalLBBins are then unused.
	KubeVIP string
	// FRRK8s, when set, is the frr-k8s binary: MetalLB's speakers run with
	// their FRR-K8s backend (MetalLB 0.16's default), writing
	// FRRConfigurations that frr-k8s renders into each node's FRR
	// (frrk8s.go). FRR must be set too (the nodes' bgpd), and
	// MetalLBManifest be metallb-frr-k8s.yaml of MetalLB >= 0.16.1.
	FRRK8s string
	// Upstream, when set, is a folder of upstream v3.8.1's captured state
	// in MetalLB CRD mode (upstreamfixture's format): the cluster starts
	// as upstream left it, without this CCM (upstream.go), MetalLB
	// announcing upstream's Services; UpgradeCloud then installs the CCM
	// to take over. Only with MetalLB's native speaker.
	Upstream string
}

// Speaker names what announces the cluster's Services: a row of the
// speaker table of TESTING.md.
func (o *CloudOptions) Speaker() string {
	switch {
	case o.KubeVIP != "":
		return "kube-vip"
	case o.Legacy:
		return "metallb-configmap"
	case o.FRRK8s != "":
		return "metallb-frr-k8s"
	case o.FRR != "":
		return "metallb-frr"
	}
	return "metallb-native"
}

const (
	// CCMImage is the name the CCM's image is imported under.
	CCMImage = "cluster.test/cloud-provider-equinix-metal:test"
	// AgnhostImage is the e2e tests' image as k8s.io/kubernetes v1.37.1's
	// test/utils/image/manifest.go names it.
	AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	// CCMNamespace is where the chart is installed.
	CCMNamespace     = "kube-system"
	metallbNamespace = "metallb-system"
	// Metro is where every device is.
	Metro = "da"
	// controlPlaneLabel marks node-1.
	controlPlaneLabel = "node-role.kubernetes.io/control-plane"
)

// startEmulator seeds a device per node and serves the API on the host's
// address the nodes reach.
func (c *Cluster) startEmulator(noMultihop bool) error {
	seed := emulator.DefaultSeed()
	for i := range seed.Metros {
		if seed.Metros[i].Code == Metro {
			seed.Metros[i].PrivateIPv4 = nodeNet
			if c.DualStack {
				seed.Metros[i].PublicIPv6 = metroNet6
			}
		}
	}
	seed.Projects[0].BGP = &emulator.BGPConfigSeed{ASN: projectASN}
	for _, n := range c.Nodes {
		// n.IPv6 is "" (drawn by the emulator) unless dual-stack.
		d := emulator.DeviceSeed{Hostname: n.Name, Metro: Metro, PrivateIPv4: n.IP, PublicIPv6: n.IPv6}
		if noMultihop {
			no := false
			d.BGPNeighbors = []emulator.BGPNeighborSeed{{AddressFamily: 4, Multihop: &no}, {AddressFamily: 6, Multihop: &no}}
		}
		seed.Devices = append(seed.Devices, d)
	}
	seed.Reservations = append(seed.Reservations, emulator.ReservationSeed{Metro: Metro, Tags: []string{ControlPlaneEIPTag}})
	emu, err := emulator.New(seed, emulator.Options{})
	if err != nil {
		return fmt.Errorf("cluster: emulator: %w", err)
	}
	if _, err := emu.Listen(hostIP + ":0"); err != nil {
		return fmt.Errorf("cluster: emulator: %w", err)
	}
	c.Emu = emu
	return nil
}

// cloudImages are the images a cloud cluster adds to every node.
func cloudImages(o *CloudOptions, metallb []*unstructured.Unstructured) ([]nodeImage, error) {
	ccm, err := layoutImage(o.CCMImage)
	if err != nil {
		return nil, err
	}
	out := []nodeImage{{CCMImage, ccm}}
	if o.KubeVIP != "" {
		kv, err := kubeVIPImage(o.KubeVIP)
		if err != nil {
			return nil, err
		}
		out = append(out, kv)
	}
	for _, component := range []string{"controller", "speaker"} {
		if o.KubeVIP != "" {
			break
		}
		ref := metallbImage(metallb, component)
		if ref == "" {
			return nil, fmt.Errorf("cluster: %s names no %s image", o.MetalLBManifest, component)
		}
		bin := filepath.Join(o.MetalLBBins, component)
		img, err := hostFilesImage(map[string]string{"/" + component: bin}, false, []string{"/" + component}, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, nodeImage{ref, img})
	}
	if o.FRRK8s != "" {
		img, err := frrK8sImage(metallb, o.FRRK8s)
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	if o.Agnhost != "" {
		// The e2e tests run sh -c 'curl ...', 'wget ...' and 'nc ...' in
		// agnhost pods. Debian's: busybox's wget crashes here, and
		// busybox's sh runs its own applets before anything on PATH, so
		// /bin/sh is dash.
		// nc is OpenBSD's, as in agnhost's own image: the e2e tests
		// run nc -v -t -w 2 (busybox's nc knows neither -v nor -t).
		img, err := hostFilesImage(map[string]string{"/agnhost": o.Agnhost, "/usr/bin/curl": "/usr/bin/curl",
			"/usr/bin/wget": "/usr/bin/wget", "/bin/sh": "/bin/dash", "/usr/bin/nc": "/usr/bin/nc.openbsd",
			"/bin/nc": "/usr/bin/nc.openbsd"}, true,
			[]string{"/agnhost"}, []string{"pause"},
			// Debian's wget tries 20 times where busybox's (which the
			// tests expect) gives up after one: a blocked address would
			// take minutes to report.
			tarEntry{name: "etc/wgetrc", data: []byte("tries = 1\n"), mode: 0o644})
		if err != nil {
			return nil, err
		}
		out = append(out, nodeImage{AgnhostImage, img})
	}
	return out, nil
}

// readMetalLB reads MetalLB's manifest as it will be applied: without its
// CRDs (kube-apiserver 1.37 refuses 0.15's; testenv installs the current
// ones) and without its webhooks (the controller's admission webhook and
// certificate rotation are off, as in the project's other data-plane
// tests), so its objects, RBAC, Deployment and DaemonSet are MetalLB's own.
func readMetalLB(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: MetalLB's manifest: %w (make e2e-bins downloads it)", err)
	}
	all, err := decodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", path, err)
	}
	// MetalLB <= 0.12 has no webhooks, and its controller refuses the
	// flags that turn them off.
	webhooks, namespace := false, false
	for _, u := range all {
		webhooks = webhooks || u.GetKind() == "ValidatingWebhookConfiguration"
		namespace = namespace || u.GetKind() == "Namespace" && u.GetName() == metallbNamespace
	}
	var out []*unstructured.Unstructured
	if !namespace {
		// 0.12's manifest leaves the namespace to namespace.yaml.
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(metallbNamespace)
		out = append(out, ns)
	}
	for _, u := range all {
		if g, _, _ := unstructured.NestedString(u.Object, "spec", "group"); u.GetKind() == "CustomResourceDefinition" && g == frrK8sGroup {
			out = append(out, u)
			continue
		}
		switch u.GetKind() {
		// PodSecurityPolicy (0.12's) is no kind kube-apiserver >= 1.25
		// serves.
		case "", "CustomResourceDefinition", "ValidatingWebhookConfiguration", "PodSecurityPolicy":
			continue
		case "Deployment":
			if !webhooks {
				break
			}
			if err := appendArgs(u, "--webhook-mode=disabled", "--disable-cert-rotation"); err != nil {
				return nil, err
			}
		}
		out = append(out, u)
	}
	return out, nil
}

func appendArgs(u *unstructured.Unstructured, args ...string) error {
	cs, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil || len(cs) == 0 {
		return fmt.Errorf("cluster: %s %s has no containers", u.GetKind(), u.GetName())
	}
	c := cs[0].(map[string]any)
	have, _ := c["args"].([]any)
	for _, a := range args {
		have = append(have, a)
	}
	c["args"] = have
	return unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
}

// metallbImage is the image of MetalLB's controller or speaker in the
// manifest.
func metallbImage(objs []*unstructured.Unstructured, component string) string {
	for _, u := range objs {
		if u.GetKind() != "Deployment" && u.GetKind() != "DaemonSet" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			if img, _ := c.(map[string]any)["image"].(string); strings.Contains(img, "/"+component+":") {
				return img
			}
		}
	}
	return ""
}

// clusterConfig is the cloud-config every CCM of this cluster gets, this
// chart's or upstream's: the emulator as Equinix Metal, its project, the
// metro and the control-plane EIP's tag.
func (c *Cluster) clusterConfig() map[string]any {
	return map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": c.Emu.URL(),
		"metro": Metro, "eipTag": ControlPlaneEIPTag,
	}
}

// chartValues: the CCM's image as imported, the emulator as its Equinix
// Metal, MetalLB as its load balancer (in FRR mode with o.FRR); o.Values
// over them.
func (c *Cluster) chartValues(o *CloudOptions) map[string]any {
	repo, tag, _ := strings.Cut(CCMImage, ":")
	lb := map[string]any{"mode": "metallb"}
	switch o.Speaker() {
	case "metallb-frr":
		lb["metallb"] = map[string]any{"bgpType": "frr"}
	case "metallb-frr-k8s":
		lb["metallb"] = map[string]any{"bgpType": "frr-k8s"}
	case "metallb-configmap":
		lb["mode"] = "metallb-legacy"
	case "kube-vip":
		lb["mode"] = "kube-vip"
	}
	cfg := c.clusterConfig()
	if o.DualStack {
		// The kubelets name their IPv4 alone with --node-ip: kube-proxy
		// takes the node's IPv6 from the ExternalIP.
		cfg["nodeExternalIPv6"] = true
	}
	v := map[string]any{
		"image":        map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
		"config":       cfg,
		"loadBalancer": lb,
		// V(2): each module sync's phases ("Load-balancer module
		// synced"), which the stage table prints beside its figures.
		"additionalCommands": []any{"--v=2"},
	}
	return mergeValues(v, o.Values)
}

// frrBinaries is what test/dataplane's FRR needs of o.
func frrBinaries(o *CloudOptions) dataplane.Binaries {
	return dataplane.Binaries{FRR: o.FRR, FRRController: filepath.Join(o.MetalLBBins, "controller"),
		FRRSpeaker: filepath.Join(o.MetalLBBins, "speaker")}
}

// startFRR gives each node a bgpd (with BFD asked for, bfdd and zebra too)
// in its netns, its files in
// <Dir>/frr-<node>, which frrSpeaker mounts into the node's speaker.
func (c *Cluster) startFRR(o *CloudOptions) error {
	for _, n := range c.Nodes {
		start := dataplane.StartFRRIn
		if o.configValue("bgpBFDInterval") != "" {
			start = dataplane.StartFRRBFD // bfdd, and zebra for bgpd to reach it
		}
		f, err := start(n.NetNS, frrBinaries(o), c.Dir, n.Name, n.IP)
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		c.frrs = append(c.frrs, f)
	}
	return nil
}

// frrSpeaker turns MetalLB's native speaker DaemonSet into one in FRR
// mode whose FRR is outside the pod: MetalLB's own FRR manifest carries
// FRR and its reloader as containers of an image this machine cannot
// pull; here bgpd runs on the node (startFRR) and this process is the
// reloader. The speaker finds its node's files (frr.conf it writes,
// reloader.pid it signals) at the fixed /etc/frr_reloader, a hostPath per
// node (subPathExpr on its node name), and signals the reloader in the
// host's PID namespace (hostPID).
func frrSpeaker(objs []*unstructured.Unstructured, hostDir string) error {
	for _, u := range objs {
		if u.GetKind() != "DaemonSet" || u.GetName() != "speaker" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
		cs, _ := spec["containers"].([]any)
		if len(cs) == 0 {
			return fmt.Errorf("cluster: MetalLB's speaker DaemonSet has no containers")
		}
		ct := cs[0].(map[string]any)
		env, _ := ct["env"].([]any)
		for k, v := range map[string]string{"METALLB_BGP_TYPE": "frr", "FRR_CONFIG_FILE": "/etc/frr_reloader/frr.conf",
			"FRR_RELOADER_PID_FILE": "/etc/frr_reloader/reloader.pid"} {
			env = append(env, map[string]any{"name": k, "value": v})
		}
		ct["env"] = env
		mounts, _ := ct["volumeMounts"].([]any)
		ct["volumeMounts"] = append(mounts, map[string]any{"name": "frr-reloader", "mountPath": "/etc/frr_reloader",
			"subPathExpr": "frr-$(METALLB_NODE_NAME)"})
		vols, _ := spec["volumes"].([]any)
		spec["volumes"] = append(vols, map[string]any{"name": "frr-reloader",
			"hostPath": map[string]any{"path": hostDir, "type": "Directory"}})
		spec["hostPID"] = true
		return unstructured.SetNestedMap(u.Object, spec, "spec", "template", "spec")
	}
	return fmt.Errorf("cluster: MetalLB's manifest has no speaker DaemonSet")
}

// configValue is the chart's config value key, if the options set it.
func (o *CloudOptions) configValue(key string) string {
	cfg, _ := o.Values["config"].(map[string]any)
	v, _ := cfg[key].(string)
	return v
}

func mergeValues(dst, src map[string]any) map[string]any {
	for k, sv := range src {
		if sm, ok := sv.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = sv
	}
	return dst
}

// installCloud labels node-1 the control plane, installs the chart and
// MetalLB, and waits until the CCM initialised every node, the speakers
// run and each router has a session with each node.
func (c *Cluster) installCloud(ctx context.Context, o *CloudOptions, metallb []*unstructured.Unstructured) error {
	began := time.Now()
	patch := []byte(`{"metadata":{"labels":{"` + controlPlaneLabel + `":""}}}`)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, c.Nodes[0].Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cluster: labelling %s: %w", c.Nodes[0].Name, err)
	}
	if err := c.forwardAPIServer(c.Nodes[0]); err != nil {
		return err
	}
	if o.BeforeCCM != nil {
		if err := o.BeforeCCM(c); err != nil {
			return err
		}
	}
	if o.Upstream != "" {
		if err := c.installUpstream(ctx, o, metallb); err != nil {
			return err
		}
		c.logf("cluster: upstream's leftovers in place, MetalLB's controller and speakers on %v ready after %s", c.speakerNodes, time.Since(began).Round(time.Millisecond))
		return nil
	}
	ch, err := deploycheck.LoadChart(chartDir())
	if err != nil {
		return err
	}
	objs, err := deploycheck.RenderChart(ch, c.chartValues(o), CCMNamespace)
	if err != nil {
		return err
	}
	if err := deploycheck.Apply(ctx, c.Env.Config, objs); err != nil {
		return fmt.Errorf("cluster: installing the chart: %w", err)
	}
	if o.KubeVIP != "" {
		kv, err := kubeVIPManifest(o.KubeVIP)
		if err != nil {
			return err
		}
		if err := deploycheck.Apply(ctx, c.Env.Config, kv); err != nil {
			return fmt.Errorf("cluster: installing kube-vip: %w", err)
		}
		if err := c.waitInitialised(ctx); err != nil {
			return err
		}
		c.logf("cluster: the CCM initialised %d nodes after %s", len(c.Nodes), time.Since(began).Round(time.Millisecond))
		if err := c.waitKubeVIP(ctx); err != nil {
			return err
		}
		c.logf("cluster: kube-vip ready on %v after %s", c.speakerNodes, time.Since(began).Round(time.Millisecond))
		return nil
	}
	switch {
	case o.FRRK8s != "":
		if metallb, err = frrK8sDaemon(metallb, c.Dir); err != nil {
			return err
		}
	case o.FRR != "":
		if err := frrSpeaker(metallb, c.Dir); err != nil {
			return err
		}
	}
	if o.Legacy {
		// The CCM fills the ConfigMap but, as upstream's, never creates
		// it, and MetalLB 0.12's manifest has none: its administrator
		// creates an empty one.
		cm := &unstructured.Unstructured{}
		cm.SetAPIVersion("v1")
		cm.SetKind("ConfigMap")
		cm.SetNamespace(metallbNamespace)
		cm.SetName("config")
		metallb = append(metallb, cm)
	}
	if err := deploycheck.Apply(ctx, c.Env.Config, metallb); err != nil {
		return fmt.Errorf("cluster: installing MetalLB: %w", err)
	}
	if err := c.waitInitialised(ctx); err != nil {
		return err
	}
	c.logf("cluster: the CCM initialised %d nodes after %s", len(c.Nodes), time.Since(began).Round(time.Millisecond))
	if err := c.waitMetalLB(ctx); err != nil {
		return err
	}
	c.logf("cluster: MetalLB's controller and speakers on %v ready after %s", c.speakerNodes, time.Since(began).Round(time.Millisecond))
	return nil
}

// waitMetalLB: the controller is available and a speaker is ready on
// every node its DaemonSet schedules to (MetalLB 0.12's tolerates only the
// "master" taint Kubernetes no longer sets, so it leaves the control-plane
// node out). (The speakers peer with the routers once the CCM wrote
// their BGPPeers, with the first LoadBalancer Service.)
func (c *Cluster) waitMetalLB(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(metallbNamespace).Get(ctx, "controller", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas < 1 {
			last = "controller not available"
			return false, nil
		}
		if c.cloud.FRRK8s != "" {
			ds, err := c.Client.AppsV1().DaemonSets(metallbNamespace).Get(ctx, frrK8sDaemonSet, metav1.GetOptions{})
			if err != nil || ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
				last = "frr-k8s not ready on every node"
				return false, nil
			}
		}
		return c.speakersReady(ctx, metallbNamespace, "speaker", &last)
	})
	if err != nil {
		return fmt.Errorf("cluster: MetalLB (%s; %s): %w", last, c.podSummary(metallbNamespace), err)
	}
	return nil
}

// speakersReady: the speaker DaemonSet's pods are ready on every node it
// schedules to; those nodes become c.speakerNodes.
func (c *Cluster) speakersReady(ctx context.Context, ns, name string, last *string) (bool, error) {
	ds, err := c.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
		*last = "speakers not ready on every node"
		return false, nil
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		*last = err.Error()
		return false, nil
	}
	c.speakerNodes = nil
	for _, p := range pods.Items {
		c.speakerNodes = append(c.speakerNodes, p.Spec.NodeName)
	}
	sort.Strings(c.speakerNodes)
	return len(c.speakerNodes) == int(ds.Status.NumberReady), nil
}

// SpeakerNodes are the nodes a speaker runs on: those that peer with the
// routers and announce.
func (c *Cluster) SpeakerNodes() []string { return c.speakerNodes }

// waitInitialised: every Node has a provider ID and no uninitialized taint.
func (c *Cluster) waitInitialised(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, n := range nodes.Items {
			if n.Spec.ProviderID == "" {
				last = n.Name + " has no provider ID"
				return false, nil
			}
			for _, t := range n.Spec.Taints {
				if t.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
					last = n.Name + " still has the uninitialized taint"
					return false, nil
				}
			}
		}
		return len(nodes.Items) == len(c.Nodes), nil
	})
	if err != nil {
		return fmt.Errorf("cluster: the CCM did not initialise the nodes (%s; %s): %w", last, c.podSummary(CCMNamespace), err)
	}
	return nil
}

// WaitSessions waits until each router has an IPv4 session up with each
// node that runs a speaker and, with ipv6, an IPv6 one too (a dual-stack cluster's nodes
// peer over IPv6 once a Service needs it).
func (c *Cluster) WaitSessions(ctx context.Context, ipv6 bool) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		for _, r := range c.Routers {
			n4, n6, err := r.Established()
			if err != nil {
				return false, err
			}
			if want := len(c.speakerNodes); n4 < want || ipv6 && n6 < want {
				last = fmt.Sprintf("%s has %d IPv4 and %d IPv6 sessions up with the %d nodes %v", r.Name, n4, n6, want, c.speakerNodes)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cluster: BGP sessions (%s; %s): %w", last, c.podSummary(metallbNamespace), err)
	}
	return nil
}

// SessionUps sums Router.SessionUps over the routers, by router and
// session ("kc12ab-b1/node1").
func (c *Cluster) SessionUps() (map[string]int, error) {
	all := map[string]int{}
	for _, r := range c.Routers {
		ups, err := r.SessionUps()
		if err != nil {
			return nil, err
		}
		for p, n := range ups {
			all[r.Name+"/"+p] = n
		}
	}
	return all, nil
}

// FRRReloads counts the speakers' files applied to the nodes' bgpd (a
// cluster with CloudOptions.FRR).
func (c *Cluster) FRRReloads() int {
	n := 0
	for _, f := range c.frrs {
		n += f.Reloads()
	}
	return n
}

// podSummary is one line per pod of the namespace: what a failed wait
// should show.
func (c *Cluster) podSummary(ns string) string {
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return "pods: " + err.Error()
	}
	var s []string
	for _, p := range pods.Items {
		st := string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				st += " " + cs.State.Waiting.Reason
			}
			if cs.RestartCount > 0 {
				st += fmt.Sprintf(" restarts=%d", cs.RestartCount)
			}
		}
		s = append(s, fmt.Sprintf("%s on %s: %s", p.Name, p.Spec.NodeName, st))
	}
	if len(s) == 0 {
		return "no pods in " + ns
	}
	return strings.Join(s, "; ")
}

// ServiceIngress waits for the Service's first ingress IP.
func (c *Cluster) ServiceIngress(ctx context.Context, ns, name string) (string, error) {
	var ip string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		s, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ip = in.IP
				return true, nil
			}
		}
		return false, nil
	})
	return ip, err
}

// chartDir finds deploy/chart from the working directory up (a test runs
// in its package's directory, make run at the root).
func chartDir() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "deploy", deploy.ChartDir)
		if _, err := os.Stat(filepath.Join(p, "Chart.yaml")); err == nil {
			return p
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "deploy", deploy.ChartDir)
		}
	}
}

// events are the reasons and messages of the object's Events.
func (c *Cluster) events(ns, name string) string {
	list, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, e := range list.Items {
		s = append(s, e.Reason+": "+e.Message)
	}
	return strings.Join(s, " | ")
}

// UpgradeCloud is what `helm upgrade --reuse-values` of the CCM's release
// does: the chart rendered again with values over the ones it was last
// installed or upgraded with, and applied. A change of the pod template (an annotation, the
// config Secret's checksum) rolls the Deployment, one replica at a time.
//
// In a cluster that started as upstream left it (CloudOptions.Upstream),
// the first call installs the CCM.
func (c *Cluster) UpgradeCloud(ctx context.Context, values map[string]any) error {
	ch, err := deploycheck.LoadChart(chartDir())
	if err != nil {
		return err
	}
	if c.cloud.Values == nil {
		c.cloud.Values = map[string]any{}
	}
	c.cloud.Values = mergeValues(c.cloud.Values, values)
	objs, err := deploycheck.RenderChart(ch, c.chartValues(c.cloud), CCMNamespace)
	if err != nil {
		return err
	}
	if err := deploycheck.Apply(ctx, c.Env.Config, objs); err != nil {
		return fmt.Errorf("cluster: upgrading the chart: %w", err)
	}
	return nil
}
