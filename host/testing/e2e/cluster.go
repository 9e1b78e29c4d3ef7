//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/testing/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/testing/testenv"
)

// The routers, as the emulator's BGP neighbour data names them.
var (
	RouterAddrs = []string{"169.254.255.1", "169.254.255.2"}
)

const (
	RouterASN  = 65530 // the emulator's peer_as
	ProjectASN = 65000 // the project's (customer) ASN
)

// Device is one machine of the test project.
type Device struct {
	Name, Metro  string
	ControlPlane bool
	// Later devices exist in Equinix Metal from the start but have no Node
	// (and no speaker) until JoinNode: a machine whose kubelet has not
	// registered yet.
	Later bool
}

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	Dir          string
	Bins         Binaries
	Devices      []Device
	LoadBalancer string // the CCM's loadbalancer setting
	PolicyDir    string // mounted policies ("" = built-in)
	Password     string // the project's BGP MD5 password ("" = none)
	// CloudConfig are more fields of the CCM's cloud-config.
	CloudConfig map[string]any
	// RouterPassword overrides what the routers require (default Password).
	RouterPassword *string
	Logf           func(string, ...any)
}

// Cluster is everything of one data-plane run.
type Cluster struct {
	Opts       ClusterOptions
	Emu        *emulator.Emulator
	Env        *testenv.Env
	Kube       kubernetes.Interface
	Dyn        dynamic.Interface
	Routers    []*Router
	CCM        *Proc
	Controller *Proc
	Speakers   map[string]*Proc
	NodeIP     map[string]string // node name -> private address (the BGP source)
	stops      []func()
}

// MetroBlocks are the metros' private blocks: TEST-NET addresses, which
// GoBGP accepts as next hops (it drops a 127/8 next hop from a peer that is
// not itself on 127/8).
var MetroBlocks = map[string]string{"da": "198.51.100.0/24", "sv": "203.0.113.0/24"}

// StartCluster starts, in order: the emulator, loopback addresses, the two
// routers, kube-apiserver, MetalLB's controller, the CCM; then registers
// the nodes (as kubelets do) and starts a speaker for each. It must run
// inside the private network namespace. Stop undoes it.
func StartCluster(ctx context.Context, o ClusterOptions) (_ *Cluster, err error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	c := &Cluster{Opts: o, Speakers: map[string]*Proc{}, NodeIP: map[string]string{}}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.startEmulator(); err != nil {
		return nil, err
	}
	addrs := append([]string{}, RouterAddrs...)
	for _, ip := range c.NodeIP {
		addrs = append(addrs, ip)
	}
	if err := AddLoopbackAddresses(addrs...); err != nil {
		return nil, err
	}
	if err := c.startRouters(); err != nil {
		return nil, err
	}
	began := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{Dir: filepath.Join(o.Dir, "cluster"), KeepDir: true})
	if err != nil {
		return nil, err
	}
	c.stops = append(c.stops, env.Stop)
	c.Env, c.Kube, c.Dyn = env, kubernetes.NewForConfigOrDie(env.Config), dynamic.NewForConfigOrDie(env.Config)
	o.Logf("kube-apiserver ready in %s", time.Since(began).Round(time.Millisecond))
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MetalLBNamespace}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if c.Controller, err = StartMetalLBController(o.Bins, o.Dir, env.KubeconfigPath); err != nil {
		return nil, err
	}
	c.stops = append(c.stops, c.Controller.Stop)
	if err := c.startCCM(); err != nil {
		return nil, err
	}
	for _, d := range o.Devices {
		if d.Later {
			continue
		}
		if err := c.JoinNode(ctx, d.Name); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) startEmulator() error {
	seed := emulator.DefaultSeed()
	for i := range seed.Metros {
		if b, ok := MetroBlocks[seed.Metros[i].Code]; ok {
			seed.Metros[i].PrivateIPv4 = b
		}
	}
	seed.Projects[0].BGP = &emulator.BGPConfigSeed{ASN: ProjectASN, MD5: c.Opts.Password}
	for _, d := range c.Opts.Devices {
		seed.Devices = append(seed.Devices, emulator.DeviceSeed{Hostname: d.Name, Metro: d.Metro})
	}
	emu, err := emulator.New(seed, emulator.Options{})
	if err != nil {
		return err
	}
	if _, err := emu.Listen("127.0.0.1:0"); err != nil {
		return err
	}
	c.Emu = emu
	c.stops = append(c.stops, emu.Close)
	for _, d := range c.Opts.Devices {
		dev, ok := emu.DeviceByHostname(emulator.DefaultProjectID, d.Name)
		if !ok {
			return fmt.Errorf("emulator: no device %s", d.Name)
		}
		a, ok := dev.Address(emulator.TypePrivateIPv4)
		if !ok {
			return fmt.Errorf("emulator: device %s has no private IPv4", d.Name)
		}
		c.NodeIP[d.Name] = a.String()
	}
	return nil
}

func (c *Cluster) startRouters() error {
	var nodes []string
	for _, ip := range c.NodeIP {
		nodes = append(nodes, ip)
	}
	sort.Strings(nodes)
	pass := c.Opts.Password
	if c.Opts.RouterPassword != nil {
		pass = *c.Opts.RouterPassword
	}
	for i, addr := range RouterAddrs {
		r, err := StartRouter(c.Opts.Bins, c.Opts.Dir, RouterOptions{
			Name: fmt.Sprintf("router-%d", i+1), Addr: addr, ASN: RouterASN, APIPort: 50051 + i,
			Password: pass, Neighbors: nodes, PeerASN: ProjectASN,
		})
		if err != nil {
			return err
		}
		c.Routers = append(c.Routers, r)
		c.stops = append(c.stops, r.Stop)
	}
	return nil
}

func (c *Cluster) startCCM() error {
	cc := map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": c.Emu.URL(),
		"loadbalancer": c.Opts.LoadBalancer, "moduleCacheDir": filepath.Join(c.Opts.Dir, "module-cache"),
	}
	if c.Opts.PolicyDir != "" {
		cc["policyDir"] = c.Opts.PolicyDir
	}
	for k, v := range c.Opts.CloudConfig {
		cc[k] = v
	}
	b, _ := json.MarshalIndent(cc, "", "  ")
	path := filepath.Join(c.Opts.Dir, "cloud-sa.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	p, err := Start(c.Opts.Dir, "ccm", c.Opts.Bins.CCM, []string{
		"--kubeconfig=" + c.Env.KubeconfigPath, "--cloud-config=" + path,
		"--leader-elect=false", "--secure-port=0", "--authentication-skip-lookup", "--v=2",
	}, []string{"METAL_API_KEY="})
	if err != nil {
		return err
	}
	c.CCM = p
	c.stops = append(c.stops, p.Stop)
	return nil
}

// JoinNode registers the device's Node as kubelet --cloud-provider=external
// does (hostname label, uninitialized taint, then Ready), and starts the
// node's speaker, as MetalLB's DaemonSet would.
func (c *Cluster) JoinNode(ctx context.Context, name string) error {
	var dev *Device
	for i := range c.Opts.Devices {
		if c.Opts.Devices[i].Name == name {
			dev = &c.Opts.Devices[i]
		}
	}
	if dev == nil {
		return fmt.Errorf("no device %s", name)
	}
	labels := map[string]string{v1.LabelHostname: name}
	if dev.ControlPlane {
		labels["node-role.kubernetes.io/control-plane"] = ""
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
	created, err := c.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	created.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: now, LastTransitionTime: now}}
	created.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: name}}
	if _, err := c.Kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// The speaker reads its own Pod (the owner of its status objects), as
	// the DaemonSet controller and the scheduler would have created it.
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: MetalLBNamespace, Name: speakerPod(name), Labels: map[string]string{"app": "metallb", "component": "speaker"}},
		Spec: v1.PodSpec{NodeName: name, HostNetwork: true, Containers: []v1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker:v0.15.3"}}}}
	if _, err := c.Kube.CoreV1().Pods(MetalLBNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	sp, err := StartSpeaker(c.Opts.Bins, c.Opts.Dir, c.Env.KubeconfigPath, name, speakerPod(name), c.NodeIP[name])
	if err != nil {
		return err
	}
	c.Speakers[name] = sp
	return nil
}

// RemoveNode deletes the Node (as a drained, decommissioned machine's is)
// and stops its speaker.
func (c *Cluster) RemoveNode(ctx context.Context, name string) error {
	if err := c.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if sp := c.Speakers[name]; sp != nil {
		sp.Stop()
		delete(c.Speakers, name)
	}
	return c.Kube.CoreV1().Pods(MetalLBNamespace).Delete(ctx, speakerPod(name), metav1.DeleteOptions{})
}

func speakerPod(node string) string { return "speaker-" + node }

// Stop ends everything, newest first.
func (c *Cluster) Stop() {
	for _, sp := range c.Speakers {
		sp.Stop()
	}
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
	c.stops = nil
}

var bgpPeersGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}

// BGPObjects lists, sorted, the nodes with the CCM's BGP annotations and the
// nodes MetalLB BGPPeers select.
func (c *Cluster) BGPObjects(ctx context.Context) (annotated, peered []string, err error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, n := range nodes.Items {
		if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "" {
			annotated = append(annotated, n.Name)
		}
	}
	peers, err := c.Dyn.Resource(bgpPeersGVR).Namespace(MetalLBNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	for _, p := range peers.Items {
		sels, _, _ := unstructured.NestedSlice(p.Object, "spec", "nodeSelectors")
		for _, s := range sels {
			m, _ := s.(map[string]any)
			labels, _ := m["matchLabels"].(map[string]any)
			if h, ok := labels[v1.LabelHostname].(string); ok && !seen[h] {
				seen[h] = true
				peered = append(peered, h)
			}
		}
	}
	sort.Strings(annotated)
	sort.Strings(peered)
	return annotated, peered, nil
}
