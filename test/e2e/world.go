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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
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

// WorldOptions configure StartWorld.
type WorldOptions struct {
	Dir          string
	Bins         dataplane.Binaries
	Devices      []Device
	LoadBalancer string // the CCM's loadbalancer setting
	PolicyDir    string // mounted policies ("" = built-in)
	Password     string // the project's BGP MD5 password ("" = none)
	// CloudConfig are more fields of the CCM's cloud-config.
	CloudConfig map[string]any
	// ControlPlaneEIPTag, when set, seeds an Elastic IP with this tag
	// assigned to the first control-plane device, serves /healthz on the
	// control-plane nodes (World.Health) and tells the CCM about it.
	ControlPlaneEIPTag string
	// NoMetalLB runs neither MetalLB's controller nor its speakers (for a
	// load-balancer mode MetalLB does not read, such as kube-vip).
	NoMetalLB bool
	// LegacyConfigMap, when set, runs MetalLB 0.12 reading this ConfigMap
	// (in dataplane.MetalLBNamespace) instead of the current MetalLB.
	LegacyConfigMap string
	// DualStack makes the cluster dual-stack, as the IPv6 data plane needs:
	// kube-apiserver gives Services IPv6 too, each node's public IPv6 is
	// on the loopback, and the routers also peer over IPv6 (at
	// dataplane.RouterAddrs6).
	DualStack bool
	// FRR runs MetalLB's speakers in FRR mode, the mode that announces
	// IPv6, each with a bgpd of its own (MetalLB 0.16.1, Bins.ForFRR).
	FRR  bool
	Logf func(string, ...any)
}

// World is everything one data-plane test run stands up: a cluster without
// kubelets (kube-apiserver, MetalLB, one speaker per node), the emulator
// and the routers. It is not test/cluster's real cluster, hence the name.
type World struct {
	Opts       WorldOptions
	Emu        *emulator.Emulator
	Env        *testenv.Env
	Kube       kubernetes.Interface
	Dyn        dynamic.Interface
	Routers    []*dataplane.Router
	CCM        *dataplane.Proc
	Controller *dataplane.Proc
	Speakers   map[string]*dataplane.Proc
	NodeIP     map[string]string // node name -> private address (the BGP source)
	// NodeIPv6 and FRR are a dual-stack cluster's: node name -> public IPv6
	// (the IPv6 BGP source), and the node's FRR its speaker drives.
	NodeIPv6 map[string]string
	FRR      map[string]*dataplane.FRR
	// ControlPlaneEIP is the seeded reservation's ID; Health the nodes'
	// /healthz servers (both only with ControlPlaneEIPTag).
	ControlPlaneEIP string
	Health          *dataplane.HealthServers
	stops           []func()
}

// StartWorld starts, in order: the emulator, loopback addresses, the two
// routers, kube-apiserver, MetalLB's controller, the CCM; then registers
// the nodes (as kubelets do) and starts a speaker for each. It must run
// inside the private network namespace. Stop undoes it.
func StartWorld(ctx context.Context, o WorldOptions) (_ *World, err error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.FRR {
		if err := o.Bins.CheckFRR(); err != nil {
			return nil, err
		}
		o.Bins = o.Bins.ForFRR()
	}
	c := &World{Opts: o, Speakers: map[string]*dataplane.Proc{}, NodeIP: map[string]string{},
		NodeIPv6: map[string]string{}, FRR: map[string]*dataplane.FRR{}}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.startEmulator(); err != nil {
		return nil, err
	}
	// The nodes' addresses; the routers' are behind the gateway
	// (dataplane.StartRouter).
	var addrs []string
	for _, ip := range c.NodeIP {
		addrs = append(addrs, ip)
	}
	if o.DualStack {
		for _, ip := range c.NodeIPv6 {
			addrs = append(addrs, ip)
		}
	}
	if err := dataplane.AddLoopbackAddresses(addrs...); err != nil {
		return nil, err
	}
	if err := c.startRouters(); err != nil {
		return nil, err
	}
	began := time.Now()
	eo := testenv.Options{Dir: filepath.Join(o.Dir, "cluster"), KeepDir: true}
	if o.DualStack {
		eo.APIServerFlags = []string{"--service-cluster-ip-range=10.0.0.0/24,fd00:10::/108"}
	}
	env, err := testenv.Start(ctx, eo)
	if err != nil {
		return nil, err
	}
	c.stops = append(c.stops, env.Stop)
	c.Env, c.Kube, c.Dyn = env, kubernetes.NewForConfigOrDie(env.Config), dynamic.NewForConfigOrDie(env.Config)
	o.Logf("kube-apiserver ready in %s", time.Since(began).Round(time.Millisecond))
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dataplane.MetalLBNamespace}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if o.ControlPlaneEIPTag != "" {
		if err := c.startHealthServers(ctx); err != nil {
			return nil, err
		}
	}
	if !o.NoMetalLB {
		if o.LegacyConfigMap != "" {
			c.Controller, err = dataplane.StartLegacyController(o.Bins, o.Dir, env.KubeconfigPath, o.LegacyConfigMap)
		} else {
			c.Controller, err = dataplane.StartMetalLBController(o.Bins, o.Dir, env.KubeconfigPath)
		}
		if err != nil {
			return nil, err
		}
		c.stops = append(c.stops, c.Controller.Stop)
	}
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

func (c *World) startEmulator() error {
	seed := emulator.DefaultSeed()
	for i := range seed.Metros {
		if b, ok := dataplane.MetroBlocks[seed.Metros[i].Code]; ok {
			seed.Metros[i].PrivateIPv4 = b
		}
	}
	seed.Projects[0].BGP = &emulator.BGPConfigSeed{ASN: dataplane.ProjectASN, MD5: c.Opts.Password}
	for _, d := range c.Opts.Devices {
		// Control-plane devices have only their private address, where
		// Health serves /healthz: a probe of any other would leave the
		// namespace.
		cp := d.ControlPlane && c.Opts.ControlPlaneEIPTag != ""
		seed.Devices = append(seed.Devices, emulator.DeviceSeed{Hostname: d.Name, Metro: d.Metro, NoPublicIPv4: cp, NoPublicIPv6: cp})
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
		if a6, ok := dev.Address(emulator.TypePublicIPv6); ok && c.Opts.DualStack {
			c.NodeIPv6[d.Name] = a6.String()
		}
	}
	if c.Opts.ControlPlaneEIPTag == "" {
		return nil
	}
	for _, d := range c.Opts.Devices {
		if d.ControlPlane {
			dev, _ := emu.DeviceByHostname(emulator.DefaultProjectID, d.Name)
			r, err := emu.AddReservation(emulator.ReservationSeed{Metro: d.Metro, Tags: []string{c.Opts.ControlPlaneEIPTag}, AssignedTo: []string{dev.ID}})
			if err != nil {
				return err
			}
			c.ControlPlaneEIP = r.ID
			return nil
		}
	}
	return fmt.Errorf("a control-plane EIP needs a control-plane device")
}

// startHealthServers serves /healthz on each control-plane node's address
// and the port default/kubernetes targets, where the CCM probes it.
func (c *World) startHealthServers(ctx context.Context) error {
	svc, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || len(svc.Spec.Ports) == 0 {
		return fmt.Errorf("reading default/kubernetes: %v", err)
	}
	nodes := map[string]string{}
	for _, d := range c.Opts.Devices {
		if d.ControlPlane {
			nodes[d.Name] = c.NodeIP[d.Name]
		}
	}
	h, err := dataplane.StartHealthServers(nodes, svc.Spec.Ports[0].TargetPort.IntValue())
	if err != nil {
		return err
	}
	c.Health = h
	c.stops = append(c.stops, h.StopAll)
	return nil
}

// ControlPlaneHolder is the device hostname the control-plane EIP is
// assigned to ("" when none).
func (c *World) ControlPlaneHolder() string {
	r, ok := c.Emu.Reservation(c.ControlPlaneEIP)
	if !ok {
		return ""
	}
	for _, a := range r.Assignments {
		if d, ok := c.Emu.Device(a.Device); ok {
			return d.Hostname
		}
	}
	return ""
}

func (c *World) startRouters() error {
	var nodes, nodes6 []string
	for _, ip := range c.NodeIP {
		nodes = append(nodes, ip)
	}
	for _, ip := range c.NodeIPv6 {
		nodes6 = append(nodes6, ip)
	}
	// As Equinix's: a node's routes only for its own metro's addresses.
	byMetro := map[string][]string{}
	for _, d := range c.Opts.Devices {
		for _, ips := range []map[string]string{c.NodeIP, c.NodeIPv6} {
			if ip, ok := ips[d.Name]; ok {
				byMetro[d.Metro] = append(byMetro[d.Metro], ip)
			}
		}
	}
	blocks := []map[string]string{c.Emu.PublicIPv4Blocks()}
	if c.Opts.DualStack {
		blocks = append(blocks, c.Emu.PublicIPv6Blocks())
	}
	rs, err := dataplane.StartDualStackRouters(c.Opts.Bins, c.Opts.Dir, c.Opts.Password, nodes, nodes6, dataplane.Metros(byMetro, blocks...))
	if err != nil {
		return err
	}
	c.Routers = rs
	for _, r := range rs {
		c.stops = append(c.stops, r.Stop)
	}
	return nil
}

func (c *World) startCCM() error {
	cc := map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": c.Emu.URL(),
		"loadbalancer": c.Opts.LoadBalancer, "moduleCacheDir": filepath.Join(c.Opts.Dir, "module-cache"),
	}
	if c.Opts.PolicyDir != "" {
		cc["policyDir"] = c.Opts.PolicyDir
	}
	if c.Opts.ControlPlaneEIPTag != "" {
		cc["eipTag"], cc["eipHealthCheckUseHostIP"] = c.Opts.ControlPlaneEIPTag, true
	}
	for k, v := range c.Opts.CloudConfig {
		cc[k] = v
	}
	b, _ := json.MarshalIndent(cc, "", "  ")
	path := filepath.Join(c.Opts.Dir, "cloud-sa.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	p, err := dataplane.Start(c.Opts.Dir, "ccm", c.Opts.Bins.CCM, []string{
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
func (c *World) JoinNode(ctx context.Context, name string) error {
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
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return err
	}
	// A patch, not an update: the CCM's node controller writes the same
	// Node at the same time.
	now := metav1.Now()
	status, _ := json.Marshal(map[string]any{"status": v1.NodeStatus{
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
		Addresses:  []v1.NodeAddress{{Type: v1.NodeHostName, Address: name}},
	}})
	if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return err
	}
	if c.Opts.NoMetalLB {
		return nil
	}
	if c.Opts.LegacyConfigMap != "" {
		sp, err := dataplane.StartLegacySpeaker(c.Opts.Bins, c.Opts.Dir, c.Env.KubeconfigPath, c.Opts.LegacyConfigMap, name, c.NodeIP[name])
		if err != nil {
			return err
		}
		c.Speakers[name] = sp
		return nil
	}
	var frr *dataplane.FRR
	if c.Opts.FRR {
		var err error
		if frr, err = dataplane.StartFRR(c.Opts.Bins, c.Opts.Dir, name, c.NodeIP[name]); err != nil {
			return err
		}
		c.FRR[name] = frr
	}
	sp, err := dataplane.StartNodeSpeaker(ctx, c.Kube, c.Opts.Bins, c.Opts.Dir, c.Env.KubeconfigPath, name, c.NodeIP[name], frr)
	if err != nil {
		return err
	}
	c.Speakers[name] = sp
	return nil
}

// RemoveNode deletes the Node (as a drained, decommissioned machine's is)
// and stops its speaker.
func (c *World) RemoveNode(ctx context.Context, name string) error {
	if err := c.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if c.Opts.NoMetalLB {
		return nil
	}
	if sp := c.Speakers[name]; sp != nil {
		sp.Stop()
		delete(c.Speakers, name)
	}
	if frr := c.FRR[name]; frr != nil {
		frr.Stop()
		delete(c.FRR, name)
	}
	return c.Kube.CoreV1().Pods(dataplane.MetalLBNamespace).Delete(ctx, dataplane.SpeakerPod(name), metav1.DeleteOptions{})
}

// Stop ends everything, newest first.
func (c *World) Stop() {
	for _, sp := range c.Speakers {
		sp.Stop()
	}
	for _, frr := range c.FRR {
		frr.Stop()
	}
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
	c.stops = nil
}

var bgpPeersGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}

// BGPObjects lists, sorted, the nodes with the CCM's BGP annotations and the
// nodes MetalLB BGPPeers select.
func (c *World) BGPObjects(ctx context.Context) (annotated, peered []string, err error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, n := range nodes.Items {
		if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "" {
			annotated = append(annotated, n.Name)
		}
	}
	peers, err := c.Dyn.Resource(bgpPeersGVR).Namespace(dataplane.MetalLBNamespace).List(ctx, metav1.ListOptions{})
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
