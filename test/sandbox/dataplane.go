package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// The environment the sandbox passes to itself inside the namespace.
const (
	envForwardSocket  = "METAL_CCM_SANDBOX_APISERVER_SOCKET" // where to serve kube-apiserver for the outside
	envHostAddr       = "METAL_CCM_SANDBOX_HOST_ADDR"        // the outside address forwarded to it
	envEmulatorSocket = "METAL_CCM_SANDBOX_EMULATOR_SOCKET"  // where to serve the emulator for the outside
	envEmulatorAddr   = "METAL_CCM_SANDBOX_EMULATOR_ADDR"    // the outside address forwarded to it
)

// ExitCode is how the sandbox ended inside the namespace; it has said why
// already, so main exits with it and prints nothing more.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// dataPlaneOff says why the sandbox runs without the data plane ("" when it
// can run it): the routers need MetalLB's CRD mode, the binaries and
// unprivileged user namespaces.
func dataPlaneOff(o Options) (string, dataplane.Binaries) {
	if o.NoDataPlane {
		return "--data-plane=false", dataplane.Binaries{}
	}
	lb, err := config.ParseLoadBalancer(o.LoadBalancer)
	if err != nil || lb.Kind != config.LBMetalLBCRD || lb.Namespace != dataplane.MetalLBNamespace {
		return fmt.Sprintf("the routers are shown with MetalLB in CRD mode (--loadbalancer=metallb:///metallb-system); %s is not run with speakers here", o.LoadBalancer), dataplane.Binaries{}
	}
	bins, err := dataplane.DataPlaneBinaries(o.MetalLBDir, o.GoBGPDir)
	if err != nil {
		return err.Error(), bins
	}
	if err := dataplane.CheckNamespaces(); err != nil {
		return err.Error(), bins
	}
	return "", bins
}

// runInNamespace runs this same sandbox inside a private user and network
// namespace, where it can give nodes and routers their own addresses and
// run BGP on port 179 without privileges. Outside, it keeps TCP ports on
// 127.0.0.1 forwarded through Unix sockets to the kube-apiserver and the
// emulator inside, so the kubeconfig and the cloud-config the sandbox
// prints work from the host (kubectl, plan).
func runInNamespace(dir string) error {
	var env []string
	for _, f := range []struct{ file, sockEnv, addrEnv string }{
		{"kube-apiserver.sock", envForwardSocket, envHostAddr},
		{"metal-emulator.sock", envEmulatorSocket, envEmulatorAddr},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		sock := filepath.Join(dir, f.file)
		go dataplane.Forward(ln, func() (net.Conn, error) { return net.Dial("unix", sock) })
		env = append(env, f.sockEnv+"="+sock, f.addrEnv+"="+ln.Addr().String())
	}

	argv := append(append([]string{}, os.Args...), "--dir="+dir)
	cmd := dataplane.NamespaceCommand(argv, env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Ctrl-C reaches the sandbox inside directly (same process group); a
	// SIGTERM sent to this process is passed on.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the sandbox inside unshare: %w", err)
	}
	go func() {
		for s := range sigs {
			if s == syscall.SIGTERM {
				_ = cmd.Process.Signal(s)
			}
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return ExitCode(exit.ExitCode())
	}
	return err
}

// serveOutside serves the kube-apiserver on the socket the outside
// forwards to, and writes a kubeconfig for the outside address. It returns
// that kubeconfig's path ("" when not run through runInNamespace).
func serveOutside(ctx context.Context, env *testenv.Env, dir string) (string, error) {
	sock, outside := os.Getenv(envForwardSocket), os.Getenv(envHostAddr)
	if sock == "" || outside == "" {
		return "", nil
	}
	inside := strings.TrimPrefix(env.Config.Host, "https://")
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return "", fmt.Errorf("serving kube-apiserver for the outside on %s: %w", sock, err)
	}
	context.AfterFunc(ctx, func() { _ = ln.Close() })
	go dataplane.Forward(ln, func() (net.Conn, error) { return net.Dial("tcp", inside) })
	b, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(b), inside) {
		return "", fmt.Errorf("the kubeconfig %s does not name %s", env.KubeconfigPath, inside)
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, []byte(strings.ReplaceAll(string(b), inside, outside)), 0o600)
}

// emulatorOutside serves the emulator at metalURL on the socket the outside
// forwards to and returns the URL it has there; without runInNamespace
// the emulator is on the host's loopback already, and metalURL is that.
func emulatorOutside(ctx context.Context, metalURL string) (string, error) {
	sock, outside := os.Getenv(envEmulatorSocket), os.Getenv(envEmulatorAddr)
	if sock == "" || outside == "" {
		return metalURL, nil
	}
	u, err := url.Parse(metalURL)
	if err != nil {
		return "", err
	}
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return "", fmt.Errorf("serving the emulator for the outside on %s: %w", sock, err)
	}
	context.AfterFunc(ctx, func() { _ = ln.Close() })
	inside := u.Host
	go dataplane.Forward(ln, func() (net.Conn, error) { return net.Dial("tcp", inside) })
	u.Host = outside
	return u.String(), nil
}

// dataPlane is what runs of the data plane: the routers and MetalLB.
type dataPlane struct {
	bins    dataplane.Binaries
	dir     string
	routers []*dataplane.Router
	procs   []*dataplane.Proc
}

// startRouters gives the namespace's loopback the routers' and the nodes'
// addresses and starts the two routers, which accept every node's session
// and, as Equinix's, a node's routes only for addresses of its own metro's
// public block (blocks: the emulator's, by metro code). Without the data
// plane (dp nil) it does nothing.
func (dp *dataPlane) startRouters(devs []Device, blocks map[string]string) error {
	if dp == nil {
		return nil
	}
	var nodes []string
	byMetro := map[string][]string{}
	for _, d := range devs {
		nodes = append(nodes, d.PrivateIP)
		byMetro[d.Metro] = append(byMetro[d.Metro], d.PrivateIP)
	}
	// The nodes' addresses; the routers' are behind the gateway
	// (dataplane.StartRouter).
	if err := dataplane.AddLoopbackAddresses(nodes...); err != nil {
		return err
	}
	rs, err := dataplane.StartRouters(dp.bins, dp.dir, "", nodes, dataplane.Metros(byMetro, blocks))
	if err != nil {
		return err
	}
	dp.routers = rs
	say("routers (GoBGP) at %s and %s, AS%d, behind the nodes' gateway; waiting for every node's session", dataplane.RouterAddrs[0], dataplane.RouterAddrs[1], dataplane.RouterASN)
	return nil
}

// startMetalLB runs MetalLB's controller and one speaker per node, as its
// Deployment and DaemonSet would; everything they do comes from what the
// CCM writes. Without the data plane (dp nil) it does nothing.
func (dp *dataPlane) startMetalLB(ctx context.Context, kube kubernetes.Interface, kubeconfig string, devs []Device) error {
	if dp == nil {
		return nil
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dataplane.MetalLBNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	c, err := dataplane.StartMetalLBController(dp.bins, dp.dir, kubeconfig)
	if err != nil {
		return err
	}
	dp.procs = append(dp.procs, c)
	for _, d := range devs {
		sp, err := dataplane.StartNodeSpeaker(ctx, kube, dp.bins, dp.dir, kubeconfig, d.Name, d.PrivateIP, nil)
		if err != nil {
			return err
		}
		dp.procs = append(dp.procs, sp)
	}
	say("MetalLB controller and %d speakers (native BGP) started; their logs are in %s", len(devs), dp.dir)
	return nil
}

// stop ends MetalLB and the routers, all at once.
func (dp *dataPlane) stop() {
	if dp == nil {
		return
	}
	var wg sync.WaitGroup
	for _, p := range dp.procs {
		wg.Go(p.Stop)
	}
	for _, r := range dp.routers {
		wg.Go(r.Stop)
	}
	wg.Wait()
}
