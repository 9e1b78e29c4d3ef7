// Command sandbox is what `make run` starts: the Equinix Metal API emulator
// with a realistic project, a real kube-apiserver, and the CCM binary
// against both; then it registers the nodes, creates sample Services and
// shows, live, what the CCM does — Elastic IPs, BGP peers, the generated
// load-balancer objects — and finally a control-plane failover.
//
// Everything runs on loopback: the control-plane nodes' addresses are
// 127.0.0.11, 127.0.1.12 and 127.1.0.13, where the sandbox serves their /healthz; no other address
// is ever contacted.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/testing/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/testing/testenv"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

const (
	cpTag = "sandbox-control-plane-eip"
)

type options struct {
	ccm          string
	loadBalancer string
	policyDir    string
	workDir      string
	duration     time.Duration
	failoverAt   time.Duration
	refresh      time.Duration
	plain        bool
}

func main() {
	var o options
	flag.StringVar(&o.ccm, "ccm", "bin/cloud-provider-equinix-metal", "the CCM binary")
	flag.StringVar(&o.loadBalancer, "loadbalancer", "metallb:///metallb-system", "the loadbalancer setting, e.g. metallb:///metallb-system/config, kube-vip:// or wasm:///abs/path/module.wasm?key=value")
	flag.StringVar(&o.policyDir, "policy-dir", "", "a directory of Rego policies replacing the built-in ones")
	flag.StringVar(&o.workDir, "dir", "", "work directory (kubeconfig, logs); default a new temporary directory")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long (0: run until Ctrl-C)")
	flag.DurationVar(&o.failoverAt, "failover-after", 20*time.Second, "stop the control-plane EIP holder's kube-apiserver this long after start-up (0: never)")
	flag.DurationVar(&o.refresh, "refresh", 2*time.Second, "how often the view is redrawn")
	flag.BoolVar(&o.plain, "plain", false, "append views instead of redrawing the screen")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(1)
	}
}

// device is one machine of the sandbox project.
type device struct {
	name, metro  string
	controlPlane bool
	privateIP    string
}

var devices = []device{
	{name: "cp-0", metro: "da", controlPlane: true, privateIP: "127.0.0.11"},
	{name: "cp-1", metro: "da", controlPlane: true, privateIP: "127.0.1.12"},
	{name: "cp-2", metro: "sv", controlPlane: true, privateIP: "127.1.0.13"},
	{name: "worker-0", metro: "da"}, {name: "worker-1", metro: "da"}, {name: "worker-2", metro: "da"},
	{name: "worker-3", metro: "sv"}, {name: "worker-4", metro: "sv"},
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if _, err := os.Stat(o.ccm); err != nil {
		return fmt.Errorf("no CCM binary at %s: run make build (make run does it for you)", o.ccm)
	}
	dir := o.workDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "ccm-sandbox-"); err != nil {
			return err
		}
	}
	say := func(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

	// 1. Equinix Metal, emulated.
	seed := emulator.DefaultSeed()
	// Private networks on loopback: the BGP source addresses and the
	// control-plane health checks stay on this machine.
	for i := range seed.Metros {
		switch seed.Metros[i].Code {
		case "da":
			seed.Metros[i].PrivateIPv4 = "127.0.0.0/16"
		case "sv":
			seed.Metros[i].PrivateIPv4 = "127.1.0.0/16"
		}
	}
	for _, d := range devices {
		s := emulator.DeviceSeed{Hostname: d.name, Metro: d.metro}
		if d.controlPlane {
			// Loopback addresses, so the health checks reach the sandbox's
			// /healthz servers and nothing else.
			s.PrivateIPv4, s.NoPublicIPv4, s.NoPublicIPv6 = d.privateIP, true, true
		}
		seed.Devices = append(seed.Devices, s)
	}
	emu, err := emulator.New(seed, emulator.Options{})
	if err != nil {
		return err
	}
	metalURL, err := emu.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer emu.Close()
	for i := range devices {
		if d, ok := emu.DeviceByHostname(emulator.DefaultProjectID, devices[i].name); ok {
			if a, ok := d.Address(emulator.TypePrivateIPv4); ok {
				devices[i].privateIP = a.String()
			}
		}
	}
	cp0, _ := emu.DeviceByHostname(emulator.DefaultProjectID, "cp-0")
	cpEIP, err := emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: []string{cpTag}, AssignedTo: []string{cp0.ID}, Details: "control-plane endpoint"})
	if err != nil {
		return err
	}
	say("Equinix Metal emulator at %s: %d devices in metros da and sv; control-plane EIP %s on cp-0", metalURL, len(devices), cpEIP.Prefix.Addr())

	// 2. A real kube-apiserver.
	say("starting kube-apiserver and etcd (work dir %s)", dir)
	env, err := testenv.Start(ctx, testenv.Options{Dir: filepath.Join(dir, "cluster"), KeepDir: true})
	if err != nil {
		return err
	}
	defer env.Stop()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	say("kube-apiserver ready in %s; try: KUBECONFIG=%s kubectl get svc,nodes -A", env.StartDuration.Round(time.Millisecond), env.KubeconfigPath)

	// 3. The control-plane nodes' kube-apiservers, as far as /healthz goes:
	// on each node's own address and the port default/kubernetes names, as
	// kube-apiserver listens on every control-plane node.
	kubeSvc, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || len(kubeSvc.Spec.Ports) == 0 {
		return fmt.Errorf("reading default/kubernetes: %v", err)
	}
	health, err := startHealthServers(devices, kubeSvc.Spec.Ports[0].TargetPort.IntValue())
	if err != nil {
		return err
	}
	defer health.stopAll()

	// 4. Nodes, as kubelets with --cloud-provider=external register them.
	for _, d := range devices {
		labels := map[string]string{}
		if d.controlPlane {
			labels["node-role.kubernetes.io/control-plane"] = ""
		}
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.name, Labels: labels},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	say("registered %d nodes (tainted uninitialized, as kubelet --cloud-provider=external does)", len(devices))

	// 5. The CCM.
	cloudConfig := map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": metalURL,
		"loadbalancer": o.loadBalancer, "eipTag": cpTag, "eipHealthCheckUseHostIP": true,
		"moduleCacheDir": filepath.Join(dir, "module-cache"),
	}
	if o.policyDir != "" {
		cloudConfig["policyDir"] = o.policyDir
	}
	ccmCmd, ccmLog, err := startCCM(o.ccm, dir, env.KubeconfigPath, cloudConfig)
	if err != nil {
		return err
	}
	defer func() {
		_ = ccmCmd.Process.Signal(syscall.SIGTERM)
		_ = ccmCmd.Wait()
	}()
	ccmExited := make(chan error, 1)
	go func() { ccmExited <- ccmCmd.Wait() }()
	say("CCM started (loadbalancer %s); its log: %s", o.loadBalancer, ccmLog)

	// What the chosen module writes into must exist, as it would in a
	// cluster where the load balancer is installed.
	if err := prepareModuleTargets(ctx, kube, o.loadBalancer); err != nil {
		return err
	}

	// 6. Sample Services.
	for _, s := range sampleServices() {
		if _, err := kube.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	say("created Services: web (metro annotation da), api (metro annotation sv), byo (bring your own IP), nowhere (no location: expect a clear error)")
	time.Sleep(time.Second)

	v := &viewer{kube: kube, dyn: dyn, emu: emu, lb: o.loadBalancer, cpEIP: cpEIP.ID, plain: o.plain, started: time.Now()}
	ticker := time.NewTicker(o.refresh)
	defer ticker.Stop()
	var failover <-chan time.Time
	if o.failoverAt > 0 {
		failover = time.After(o.failoverAt)
	}
	for {
		v.draw(ctx)
		select {
		case <-ctx.Done():
			fmt.Printf("\n==> stopping; the cluster's files stay in %s\n", dir)
			return nil
		case err := <-ccmExited:
			return fmt.Errorf("the CCM exited (%v); its log: %s", err, ccmLog)
		case <-failover:
			holder := v.holder()
			if err := health.stop(holder); err != nil {
				v.note("failover: %v", err)
			} else {
				v.failedAt, v.failedNode = time.Now(), holder
				v.note("failover: stopped kube-apiserver /healthz on %s, the EIP holder; the CCM moves the EIP after %d failed probes", holder, 3)
			}
		case <-ticker.C:
		}
	}
}

// prepareModuleTargets creates the namespace a custom module writes into
// (its namespace option) and, in legacy MetalLB mode, the ConfigMap with an
// entry of the user's own, so the view shows the CCM merging into it.
func prepareModuleTargets(ctx context.Context, kube kubernetes.Interface, loadBalancer string) error {
	lb, err := config.ParseLoadBalancer(loadBalancer)
	if err != nil {
		return fmt.Errorf("--loadbalancer: %q %v", loadBalancer, err)
	}
	if ns := lb.Options["namespace"]; lb.Kind == config.LBWasm && ns != "" {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if lb.Kind == config.LBMetalLBConfigMap {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lb.Namespace}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: lb.Namespace, Name: lb.ConfigMap},
			Data: map[string]string{"config": "address-pools:\n- name: users-own-pool\n  protocol: bgp\n  addresses:\n  - 192.0.2.0/28\n"}}
		if _, err := kube.CoreV1().ConfigMaps(lb.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// sampleServices: one per behaviour worth seeing.
func sampleServices() []*v1.Service {
	mk := func(name string, ann map[string]string, ip string) *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: ann},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerIP: ip, Selector: map[string]string{"app": name},
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		}
	}
	return []*v1.Service{
		mk("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, ""),
		mk("api", map[string]string{"metal.equinix.com/eip-metro": "sv"}, ""),
		mk("byo", nil, "145.40.90.10"),
		mk("nowhere", nil, ""),
	}
}

func startCCM(bin, dir, kubeconfig string, cloudConfig map[string]any) (*exec.Cmd, string, error) {
	b, _ := json.MarshalIndent(cloudConfig, "", "  ")
	cc := filepath.Join(dir, "cloud-sa.json")
	if err := os.WriteFile(cc, b, 0o600); err != nil {
		return nil, "", err
	}
	logPath := filepath.Join(dir, "ccm.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig, "--cloud-config="+cc,
		"--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
		"--secure-port=0", "--authentication-skip-lookup", "--v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "METAL_API_KEY=") // the key comes from the file only
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	return cmd, logPath, nil
}

// healthServers answer /healthz like a control-plane node's kube-apiserver.
type healthServers struct {
	mu      sync.Mutex
	servers map[string]*httptest.Server // by node name
}

func startHealthServers(devs []device, port int) (*healthServers, error) {
	h := &healthServers{servers: map[string]*httptest.Server{}}
	for _, d := range devs {
		if !d.controlPlane {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", d.privateIP, port))
		if err != nil {
			h.stopAll()
			return nil, fmt.Errorf("listening on %s:%d for %s's /healthz (loopback addresses other than 127.0.0.1 are needed): %w", d.privateIP, port, d.name, err)
		}
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" {
				_, _ = w.Write([]byte("ok"))
				return
			}
			http.NotFound(w, r)
		}))
		s.Listener = ln
		s.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		s.StartTLS()
		h.servers[d.name] = s
	}
	return h, nil
}

func (h *healthServers) stop(node string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.servers[node]
	if !ok {
		return fmt.Errorf("no control-plane node %q holds the EIP", node)
	}
	s.Close()
	delete(h.servers, node)
	return nil
}

func (h *healthServers) stopAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.servers {
		s.Close()
	}
}

// viewer draws the live view.
type viewer struct {
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	emu        *emulator.Emulator
	lb         string
	cpEIP      string
	plain      bool
	started    time.Time
	failedAt   time.Time
	failedNode string
	movedAfter time.Duration
	notes      []string
	clusterID  string
}

func (v *viewer) note(format string, args ...any) {
	v.notes = append(v.notes, fmt.Sprintf("%s  %s", time.Since(v.started).Round(time.Second), fmt.Sprintf(format, args...)))
}

func (v *viewer) holder() string {
	r, ok := v.emu.Reservation(v.cpEIP)
	if !ok {
		return ""
	}
	for _, a := range r.Assignments {
		if d, ok := v.emu.Device(a.Device); ok {
			return d.Hostname
		}
	}
	return ""
}

var (
	gvrPools = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}
	gvrPeers = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}
	gvrAdvs  = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"}
)

func (v *viewer) draw(ctx context.Context) {
	if v.clusterID == "" {
		if ns, err := v.kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil {
			v.clusterID = string(ns.UID)
		}
	}
	var b strings.Builder
	if !v.plain {
		b.WriteString("\033[H\033[2J")
	}
	fmt.Fprintf(&b, "Equinix Metal CCM sandbox — %s since start — loadbalancer %s — Ctrl-C to stop\n\n", time.Since(v.started).Round(time.Second), v.lb)

	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tEXTERNAL-IP\tELASTIC IP (Equinix)\tLATEST EVENT")
	svcs, _ := v.kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	for _, s := range svcs.Items {
		if s.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue
		}
		ext := "<pending>"
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			ext = s.Status.LoadBalancer.Ingress[0].IP
		}
		res := "-"
		if v.clusterID != "" {
			for _, r := range v.emu.Reservations(emulator.DefaultProjectID, eip.Tags(v.clusterID, s.Namespace, s.Name)...) {
				res = fmt.Sprintf("%s metro %s, %s", r.Prefix, r.Metro, r.State)
			}
		}
		if s.Spec.LoadBalancerIP != "" && res == "-" {
			res = "none: bring your own IP"
		}
		if s.Namespace == "kube-system" {
			res = "control-plane EIP"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\n", s.Namespace, s.Name, ext, res, v.lastEvent(ctx, s.Namespace, s.Name))
	}
	_ = tw.Flush()

	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPROVIDER ID\tREGION/ZONE\tINTERNAL IP\tBGP PEERS (from annotations)")
	nodes, _ := v.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		var internal string
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				internal = a.Address
				break
			}
		}
		var peers []string
		for i := 0; ; i++ {
			ip := n.Annotations[fmt.Sprintf("metal.equinix.com/bgp-peers-%d-peer-ip", i)]
			if ip == "" {
				break
			}
			peers = append(peers, fmt.Sprintf("%s AS%s", ip, n.Annotations[fmt.Sprintf("metal.equinix.com/bgp-peers-%d-peer-asn", i)]))
		}
		pid := n.Spec.ProviderID
		if pid == "" {
			pid = "<uninitialised>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\n", n.Name, pid, n.Labels[v1.LabelTopologyRegion], n.Labels[v1.LabelTopologyZone], internal, strings.Join(peers, ", "))
	}
	_ = tw.Flush()

	b.WriteString("\nLoad-balancer objects the module generated:\n")
	for _, g := range []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{gvrPools, "IPAddressPool"}, {gvrPeers, "BGPPeer"}, {gvrAdvs, "BGPAdvertisement"}} {
		list, err := v.dyn.Resource(g.gvr).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		var names []string
		for _, o := range list.Items {
			names = append(names, o.GetNamespace()+"/"+o.GetName())
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "  %-17s %d: %s\n", g.kind, len(names), summarise(names, 6))
	}

	cms, err := v.kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: sdk.OwnedLabel})
	if err == nil && len(cms.Items) > 0 {
		var names []string
		for _, cm := range cms.Items {
			names = append(names, fmt.Sprintf("%s/%s (%d keys)", cm.Namespace, cm.Name, len(cm.Data)))
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "  %-17s %d: %s\n", "ConfigMap", len(names), summarise(names, 6))
	}
	if lb, err := config.ParseLoadBalancer(v.lb); err == nil && lb.Kind == config.LBMetalLBConfigMap {
		if cm, err := v.kube.CoreV1().ConfigMaps(lb.Namespace).Get(ctx, lb.ConfigMap, metav1.GetOptions{}); err == nil {
			var legacy struct {
				Pools []struct {
					Name string `json:"name"`
				} `json:"address-pools"`
				Peers []any `json:"peers"`
			}
			_ = yaml.Unmarshal([]byte(cm.Data["config"]), &legacy)
			var pools []string
			for _, p := range legacy.Pools {
				pools = append(pools, p.Name)
			}
			fmt.Fprintf(&b, "  %-17s %s/%s: %d peers; address pools: %s\n", "legacy ConfigMap", lb.Namespace, lb.ConfigMap, len(legacy.Peers), strings.Join(pools, ", "))
		}
	}

	holder := v.holder()
	fmt.Fprintf(&b, "\nControl-plane EIP holder: %s", holder)
	if v.failedNode != "" {
		if holder != v.failedNode && holder != "" && v.movedAfter == 0 {
			v.movedAfter = time.Since(v.failedAt)
			v.note("failover: the EIP moved from %s to %s in %s", v.failedNode, holder, v.movedAfter.Round(100*time.Millisecond))
		}
		if v.movedAfter == 0 {
			fmt.Fprintf(&b, " (its /healthz is down for %s; waiting for the CCM to move it)", time.Since(v.failedAt).Round(time.Second))
		}
	}
	b.WriteString("\n")
	if len(v.notes) > 0 {
		b.WriteString("\n")
		for _, n := range v.notes {
			b.WriteString("  " + n + "\n")
		}
	}
	fmt.Print(b.String())
}

func (v *viewer) lastEvent(ctx context.Context, ns, name string) string {
	list, err := v.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return eventTime(list.Items[i]).Before(eventTime(list.Items[j]))
	})
	e := list.Items[len(list.Items)-1]
	msg := e.Message
	if len(msg) > 110 {
		msg = msg[:107] + "..."
	}
	return e.Reason + ": " + msg
}

func eventTime(e v1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func summarise(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(", … (%d more)", len(names)-max)
}
