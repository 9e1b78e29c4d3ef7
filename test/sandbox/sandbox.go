// Package sandbox is what `make run` starts (through test/cmd/sandbox): the
// Equinix Metal API emulator with a realistic project, a real
// kube-apiserver, and the CCM binary against both; then it registers the
// nodes, creates sample Services and shows, live, what the CCM does —
// Elastic IPs, BGP peers, the generated load-balancer objects — and finally
// a control-plane failover.
//
// Where the machine allows unprivileged user namespaces, it also runs the
// data plane as `make e2e` does (test/dataplane): the whole sandbox
// moves into a private network namespace, with MetalLB's controller, one
// speaker per node and two GoBGP routers standing in for Equinix's, and the
// view adds the routers' table, so each Service's /32 is seen arriving
// with one next hop per node. Without user namespaces (or the binaries) it
// says why in one line and runs without them.
//
// Everything runs on loopback: without the data plane the control-plane
// nodes' addresses are 127.x addresses, where the sandbox serves their
// /healthz; with it, TEST-NET addresses on the namespace's own loopback. No
// other address is ever contacted.
package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// cpTag is the tag of the sandbox's control-plane EIP.
const cpTag = "sandbox-control-plane-eip"

// Options are the sandbox's command-line settings.
type Options struct {
	CCM          string        // the CCM binary
	LoadBalancer string        // the loadbalancer setting
	PolicyDir    string        // Rego policies replacing the built-in ones ("": built-in)
	WorkDir      string        // kubeconfig, logs; "": a new temporary directory
	Duration     time.Duration // stop after this long (0: until Ctrl-C)
	FailoverAt   time.Duration // stop the EIP holder's /healthz this long after start (0: never)
	Refresh      time.Duration // how often the view is redrawn
	Plain        bool          // append views instead of redrawing the screen
	// MetalLBDir and GoBGPDir hold MetalLB's controller and speaker and
	// gobgpd and gobgp, for the data plane; NoDataPlane turns it off.
	MetalLBDir, GoBGPDir string
	NoDataPlane          bool
}

func say(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

// Run starts everything, shows the live view until Ctrl-C (or
// o.Duration), and stops everything it started. With the data plane, the
// first call re-runs the sandbox inside a private network namespace and
// waits for it.
func Run(o Options) error {
	if _, err := os.Stat(o.CCM); err != nil {
		return fmt.Errorf("no CCM binary at %s: run make build (make run does it for you)", o.CCM)
	}
	dir := o.WorkDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "ccm-sandbox-"); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if dataplane.InNamespace() {
		_, bins := dataPlaneOff(o)
		return run(o, dir, &dataPlane{bins: bins, dir: dir})
	}
	if why, _ := dataPlaneOff(o); why != "" {
		say("data plane off (no MetalLB speakers or routers in the view): %s", why)
		return run(o, dir, nil)
	}
	say("data plane on: moving into a private network namespace (unshare --user --map-root-user --net) for MetalLB and two BGP routers")
	return runInNamespace(dir)
}

// run is the sandbox proper; dp is nil without the data plane.
func run(o Options, dir string, dp *dataPlane) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	began := time.Now()
	devs := append([]Device(nil), Devices...)
	if dp != nil {
		for i := range devs {
			devs[i].PrivateIP = "" // from the metro's TEST-NET block
		}
	}

	// 1. Equinix Metal, emulated; with the data plane, its routers.
	emu, metalURL, cpEIP, err := startEmulator(devs, dp != nil)
	if err != nil {
		return err
	}
	defer emu.Close()
	defer dp.stop()
	if err := dp.startRouters(devs, emu.PublicIPv4Blocks()); err != nil {
		return err
	}

	// 2. A real kube-apiserver.
	say("starting kube-apiserver and etcd (work dir %s)", dir)
	env, userKubeconfig, err := startKube(ctx, dir)
	if err != nil {
		return err
	}
	defer env.Stop()
	kube := kubernetes.NewForConfigOrDie(env.Config)

	// 3. The control-plane nodes' kube-apiservers, as far as /healthz goes:
	// on each node's own address and the port default/kubernetes names, as
	// kube-apiserver listens on every control-plane node.
	health, err := startHealth(ctx, kube, devs)
	if err != nil {
		return err
	}
	defer health.StopAll()

	// 4. Nodes, as kubelets with --cloud-provider=external register them;
	// with the data plane, MetalLB as its manifests would run it.
	if err := RegisterNodes(ctx, kube, devs); err != nil {
		return err
	}
	say("registered %d nodes (tainted uninitialized, as kubelet --cloud-provider=external does)", len(devs))
	if err := dp.startMetalLB(ctx, kube, env.KubeconfigPath, devs); err != nil {
		return err
	}

	// 5. The CCM.
	ccm, err := startCCM(o, dir, metalURL, env.KubeconfigPath)
	if err != nil {
		return err
	}
	defer ccm.Stop()
	say("CCM started (loadbalancer %s); its log: %s", o.LoadBalancer, ccm.Log)
	if err := sayPlan(ctx, o, dir, metalURL, userKubeconfig); err != nil {
		return err
	}

	// What the chosen module writes into must exist, as it would in a
	// cluster where the load balancer is installed.
	if err := PrepareModuleTargets(ctx, kube, o.LoadBalancer); err != nil {
		return err
	}

	// 6. Sample Services.
	if err := createServices(ctx, kube, SampleServices()); err != nil {
		return err
	}
	say("created Services: web (metro annotation da), api (metro annotation sv), byo (bring your own IP), nowhere (no location: expect a clear error)")
	say("everything started in %s", time.Since(began).Round(100*time.Millisecond))
	time.Sleep(time.Second)

	v := &Viewer{kube: kube, dyn: dynamic.NewForConfigOrDie(env.Config), emu: emu, lb: o.LoadBalancer, cpEIP: cpEIP, plain: o.Plain, started: time.Now()}
	if dp != nil {
		v.routers, v.nodeByIP = dp.routers, map[string]string{}
		for _, d := range devs {
			v.nodeByIP[d.PrivateIP] = d.Name
		}
	}
	return watch(ctx, o, v, health, ccm, dir)
}

// startKube starts kube-apiserver and etcd and says how to reach them: from
// inside a private namespace, through the port forwarded to the outside.
// It returns the kubeconfig that works from the user's shell.
func startKube(ctx context.Context, dir string) (*testenv.Env, string, error) {
	env, err := testenv.Start(ctx, testenv.Options{Dir: filepath.Join(dir, "cluster"), KeepDir: true})
	if err != nil {
		return nil, "", err
	}
	kubeconfig := env.KubeconfigPath
	outside, err := serveOutside(ctx, env, dir)
	if err != nil {
		env.Stop()
		return nil, "", err
	}
	if outside != "" {
		kubeconfig = outside
	}
	say("kube-apiserver ready in %s; try: KUBECONFIG=%s kubectl get svc,nodes -A", env.StartDuration.Round(time.Millisecond), kubeconfig)
	return env, kubeconfig, nil
}

// sayPlan writes a cloud-config that reaches the emulator from the user's
// shell (through the forwarded port when the sandbox runs in a private
// namespace) and prints the plan command that reads this sandbox.
func sayPlan(ctx context.Context, o Options, dir, metalURL, kubeconfig string) error {
	outside, err := emulatorOutside(ctx, metalURL)
	if err != nil {
		return err
	}
	cc := filepath.Join(dir, "cloud-sa.json")
	if outside != metalURL {
		cc = filepath.Join(dir, "cloud-sa.outside.json")
		if err := writeCloudConfig(cc, o, dir, outside); err != nil {
			return err
		}
	}
	say("what a sync would change, from this shell: %s plan --kubeconfig %s --cloud-config %s", o.CCM, kubeconfig, cc)
	return nil
}

// startHealth serves /healthz on every control-plane node's address, at
// the port default/kubernetes targets.
func startHealth(ctx context.Context, kube kubernetes.Interface, devs []Device) (*dataplane.HealthServers, error) {
	kubeSvc, err := kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || len(kubeSvc.Spec.Ports) == 0 {
		return nil, fmt.Errorf("reading default/kubernetes: %v", err)
	}
	nodes := map[string]string{}
	for _, d := range devs {
		if d.ControlPlane {
			nodes[d.Name] = d.PrivateIP
		}
	}
	return dataplane.StartHealthServers(nodes, kubeSvc.Spec.Ports[0].TargetPort.IntValue())
}

func createServices(ctx context.Context, kube kubernetes.Interface, svcs []*v1.Service) error {
	for _, s := range svcs {
		if _, err := kube.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := kube.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, EndpointSlice(s), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// startEmulator serves the sandbox project (devs, on loopback networks)
// and reserves the control-plane EIP on cp-0. It fills in the devices'
// private addresses as the emulator gave them.
func startEmulator(devs []Device, withDataPlane bool) (emu *emulator.Emulator, url, cpEIP string, err error) {
	emu, err = emulator.New(Seed(devs, withDataPlane), emulator.Options{})
	if err != nil {
		return nil, "", "", err
	}
	url, err = emu.Listen("127.0.0.1:0")
	if err != nil {
		return nil, "", "", err
	}
	for i := range devs {
		if d, ok := emu.DeviceByHostname(emulator.DefaultProjectID, devs[i].Name); ok {
			if a, ok := d.Address(emulator.TypePrivateIPv4); ok {
				devs[i].PrivateIP = a.String()
			}
		}
	}
	cp0, _ := emu.DeviceByHostname(emulator.DefaultProjectID, "cp-0")
	res, err := emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: []string{cpTag}, AssignedTo: []string{cp0.ID}, Details: "control-plane endpoint"})
	if err != nil {
		emu.Close()
		return nil, "", "", err
	}
	say("Equinix Metal emulator at %s: %d devices in metros da and sv; control-plane EIP %s on cp-0", url, len(devs), res.Prefix.Addr())
	return emu, url, res.ID, nil
}

// watch redraws the view until ctx ends or the CCM exits, and stops the
// EIP holder's /healthz at o.FailoverAt.
func watch(ctx context.Context, o Options, v *Viewer, health *dataplane.HealthServers, ccm *dataplane.Proc, dir string) error {
	ticker := time.NewTicker(o.Refresh)
	defer ticker.Stop()
	var failover <-chan time.Time
	if o.FailoverAt > 0 {
		failover = time.After(o.FailoverAt)
	}
	for {
		v.Draw(ctx)
		select {
		case <-ctx.Done():
			// A draw under way when ctx ended was cut short, and a view of
			// failed reads would be the last one shown: draw the end state
			// once more, with a little time of its own.
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			v.Draw(final)
			cancel()
			fmt.Printf("\n==> stopping; the cluster's files stay in %s\n", dir)
			return nil
		case <-ccm.Done():
			return fmt.Errorf("the CCM exited (%v); its log: %s", ccm.Err(), ccm.Log)
		case <-failover:
			holder := v.Holder()
			if err := health.Stop(holder); err != nil {
				v.Note("failover: %v", err)
			} else {
				v.failedAt, v.failedNode = time.Now(), holder
				v.Note("failover: stopped kube-apiserver /healthz on %s, the EIP holder; the CCM moves the EIP after %d failed probes", holder, 3)
			}
		case <-ticker.C:
		}
	}
}
