//go:build linux

package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// Options configures Start.
type Options struct {
	// Nodes is the number of nodes; default 1, at most 50.
	Nodes int
	// AssetsDir holds kube-apiserver, etcd, kubelet and pause; default
	// testenv.DefaultAssetsDir() (make cluster-bins builds them there).
	AssetsDir string
	// Dir is the work directory; default a new temporary directory, removed
	// by Stop unless KeepDir. A failed run keeps it for its logs, without
	// the nodes' containerd stores and image archives unless KeepDir.
	Dir     string
	KeepDir bool
	// Timeout bounds the start-up; default 4 minutes.
	Timeout time.Duration
	// Logf receives progress lines; default none.
	Logf func(format string, args ...any)
	// KubeProxy runs kube-proxy (iptables mode) on each node, and
	// kube-controller-manager (EndpointSlices) on the host, so ClusterIP
	// Services work.
	KubeProxy bool
	// Scheduler runs kube-scheduler (and kube-controller-manager, whose
	// node lifecycle controller lifts the not-ready taint new Nodes get);
	// without it pods need spec.nodeName.
	Scheduler bool
	// Cloud makes it an Equinix Metal cluster (cloud.go, bgp.go): it
	// implies KubeProxy and Scheduler, and 3 nodes by default (node-1 the
	// control plane).
	Cloud *CloudOptions
	// CoreDNS, when set, is a CoreDNS binary (make cluster-bins builds
	// one): it runs as kube-dns at DNSServiceIP and the kubelets give pods
	// cluster DNS (ClusterDomain). It needs KubeProxy and Scheduler.
	CoreDNS string
}

// Fixed addresses (see the package documentation).
const (
	hostIP     = "10.200.0.1"
	routerUpIP = "10.200.0.2"
	routerBrIP = "10.201.0.1"
	nodeNet    = "10.201.0.0/24"
	podNet     = "10.202.0.0/16"
	pauseImage = "registry.k8s.io/pause:3.10.2" // build/pause/Makefile's TAG in v1.37.1
	// A dual-stack cluster's IPv6 (CloudOptions.DualStack): the nodes'
	// bridge is the first /64 of the project's /56 in the emulator's
	// metro block, so each node's public IPv6 (the upper address of its
	// /127, as its private IPv4 is of its /31) is on the routers' link,
	// as BIRD wants of a directly connected BGP neighbour's next hop.
	metroNet6   = "2001:db8:100::/40"
	nodeNet6    = "2001:db8:100::/64"
	routerBrIP6 = "2001:db8:100::1"
	podNet6     = "fd00:202::/48"
	serviceNet6 = "fd00:10::/108"
	// BusyboxImage is on every node: a static busybox (/bin/sh, nc, sleep,
	// ...); pods give it with ImagePullPolicy Never.
	BusyboxImage = "cluster.test/busybox:1"
)

// Node is one running node.
type Node struct {
	Name    string
	IP      string // eth0 in the node's netns, the Node's InternalIP
	PodCIDR string
	// IPv6 and PodCIDR6 are a dual-stack cluster's: the device's public
	// IPv6 on eth0, and the pods' IPv6 range.
	IPv6     string
	PodCIDR6 string
	NetNS    string // name under /run/netns
	Dir      string
	Socket   string // containerd's socket

	cgroup     string // kubelet's cgroupRoot
	runtimeCG  string // containerd's (and so its shims') cgroup
	containerd *process
	kubelet    *process
	kubeProxy  *process
}

// Cluster is a running control plane with its nodes. Stop it when done.
type Cluster struct {
	Env   *testenv.Env
	Nodes []*Node
	// Client is an admin clientset.
	Client kubernetes.Interface
	Dir    string
	// Cloud clusters only: the emulator, the two routers, and the client
	// netns behind them.
	Emu      *emulator.Emulator
	Routers  []*Router
	ClientNS string
	// DualStack: the cluster has IPv6 too (CloudOptions.DualStack).
	DualStack bool
	cloud     *CloudOptions

	frrs []*dataplane.FRR // MetalLB's FRR mode: each node's bgpd
	// speakerNodes run a BGP speaker (MetalLB's or kube-vip), sorted.
	speakerNodes []string

	id        string
	router    string
	hostVeth  string
	cgroupTop string
	existed   map[string]bool // sharedDirs before Start
	shimsWere map[string]bool // shimSocketDir's entries before Start
	// resultsWere: libcni's cached results before Start.
	resultsWere map[string]bool
	kcm         *process
	scheduler   *process
	removeDir   bool
	keepAll     bool // Options.KeepDir: keep the node state too
	logf        func(string, ...any)
	stopOnce    sync.Once
	lock        *os.File // machineLock's, closed last by Stop
	// fabricStop ends syncFabric, which closes fabricDone.
	fabricStop, fabricDone chan struct{}
	// strays: what reached the gateway for an Elastic IP (cloud only).
	strays *Strays
}

// Start brings up the control plane and the nodes, and returns once every
// Node is Ready. On error everything started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("cluster: needs root (network namespaces, mounts, cgroups): run the test as root")
	}
	if opts.Cloud != nil {
		opts.KubeProxy, opts.Scheduler = true, true
		if opts.Nodes == 0 {
			opts.Nodes = 3
		}
	}
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if opts.Cloud != nil && opts.Cloud.DualStack && opts.Cloud.FRR == "" {
		return nil, errors.New("cluster: DualStack needs FRR: MetalLB announces IPv6 in FRR mode only (make cluster-test installs Debian's frr)")
	}
	if opts.CoreDNS != "" && !(opts.KubeProxy && opts.Scheduler) {
		return nil, errors.New("cluster: CoreDNS needs KubeProxy and Scheduler (its Service and Deployment)")
	}
	if opts.Nodes < 0 || opts.Nodes > 50 {
		return nil, fmt.Errorf("cluster: %d nodes: want 1 to 50", opts.Nodes)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 4 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	assets := opts.AssetsDir
	if assets == "" {
		if assets, err = testenv.DefaultAssetsDir(); err != nil {
			return nil, err
		}
	}
	bins := map[string]string{}
	need := []string{"kubelet", "pause"}
	if opts.KubeProxy {
		need = append(need, "kube-proxy")
	}
	if opts.Scheduler {
		need = append(need, "kube-scheduler")
	}
	if opts.KubeProxy || opts.Scheduler {
		need = append(need, "kube-controller-manager")
	}
	var metallb []*unstructured.Unstructured
	if opts.Cloud != nil {
		for _, b := range []string{"bird", "birdc"} {
			if _, err := exec.LookPath(b); err != nil {
				return nil, fmt.Errorf("cluster: %s missing: apt-get install -y bird2", b)
			}
		}
		if opts.Cloud.KubeVIP == "" {
			if metallb, err = readMetalLB(opts.Cloud.MetalLBManifest); err != nil {
				return nil, err
			}
		}
		if opts.Cloud.FRR != "" {
			if err := frrBinaries(opts.Cloud).CheckFRR(); err != nil {
				return nil, fmt.Errorf("cluster: %w", err)
			}
		}
	}
	for _, b := range need {
		p := filepath.Join(assets, b)
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("cluster: %s not found in %s: run make cluster-bins", b, assets)
		}
		bins[b] = p
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "ip", "/usr/lib/cni/ptp", "/usr/lib/cni/host-local", "/bin/busybox"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("cluster: %s missing: apt-get install -y containerd runc containernetworking-plugins busybox-static iptables conntrack", b)
		}
	}
	parent := os.TempDir()
	if opts.Dir != "" {
		parent = filepath.Dir(opts.Dir)
	}
	if err := freeSpace(parent); err != nil {
		return nil, err
	}
	// One cluster per machine: the addresses are fixed.
	lock, err := machineLock(logf)
	if err != nil {
		return nil, err
	}

	idb := make([]byte, 2)
	if _, err := rand.Read(idb); err != nil {
		lock.Close()
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, logf: logf, id: "kc" + hex.EncodeToString(idb), lock: lock,
		DualStack: opts.Cloud != nil && opts.Cloud.DualStack, cloud: opts.Cloud, keepAll: opts.KeepDir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "cluster-"); err != nil {
			lock.Close()
			return nil, fmt.Errorf("cluster: work directory: %w", err)
		}
		c.removeDir = !opts.KeepDir
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		lock.Close()
		return nil, fmt.Errorf("cluster: work directory: %w", err)
	}
	c.existed = existingDirs()
	c.shimsWere = listDir(shimSocketDir)
	c.resultsWere = listDir("/var/lib/cni/results")
	c.router = c.id + "-r"
	c.hostVeth = c.id + "h"
	c.cgroupTop = "/" + c.id
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (logs in %s)", err, c.Dir)
			c.removeDir = false
			c.Stop()
		}
	}()

	began := time.Now()
	if err := c.setupRouter(); err != nil {
		return nil, err
	}
	for i := 1; i <= opts.Nodes; i++ {
		n := &Node{
			Name: fmt.Sprintf("node-%d", i),
			// The second address of a /31 of its own: the emulator,
			// like Equinix Metal, gives each device a /31 of the
			// project's private block and the device its upper half.
			IP:      fmt.Sprintf("10.201.0.%d", 9+2*i),
			PodCIDR: fmt.Sprintf("10.202.%d.0/24", i),
			NetNS:   fmt.Sprintf("%s-n%d", c.id, i),
			Dir:     filepath.Join(c.Dir, fmt.Sprintf("node-%d", i)),
		}
		if c.DualStack {
			n.IPv6 = fmt.Sprintf("2001:db8:100::%x", 9+2*i)
			n.PodCIDR6 = fmt.Sprintf("fd00:202:0:%x::/64", i)
		}
		n.cgroup = c.cgroupTop + "/" + n.Name
		n.runtimeCG = c.cgroupTop + "/" + n.Name + "-runtime"
		c.Nodes = append(c.Nodes, n)
		if err := c.setupNodeNet(n, i); err != nil {
			return nil, err
		}
	}
	if opts.Cloud != nil {
		if err := c.setupBGPNet(); err != nil {
			return nil, err
		}
		for _, n := range c.Nodes {
			if err := c.nodeBGPRoutes(n, "add"); err != nil {
				return nil, err
			}
		}
		if err := c.startRouters(); err != nil {
			return nil, err
		}
		if err := c.startEmulator(opts.Cloud.NoMultihop); err != nil {
			return nil, err
		}
		// A diagnosis, not a part of the network: without it the failed
		// requests' messages only say less.
		if c.strays, err = c.watchStrays(); err != nil {
			logf("cluster: %v (lost requests will not name who sent them to the gateway)", err)
		}
		c.fabricStop, c.fabricDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(c.fabricDone)
			c.syncFabric(c.fabricStop)
		}()
	}
	logf("cluster: network up after %s", time.Since(began).Round(time.Millisecond))

	clientCA := filepath.Join(c.Dir, "client-ca.crt")
	if err := writeSelfSignedCA(clientCA); err != nil {
		return nil, err
	}
	eo := testenv.Options{
		AssetsDir: assets,
		Dir:       filepath.Join(c.Dir, "controlplane"),
		Logf:      logf,
		// Pods get their ServiceAccount's token (the CCM and MetalLB run
		// in cluster); kube-controller-manager makes the default ones.
		ServiceAccounts: opts.Cloud != nil,
		// Clients in other netns (e2e.test in the client's) reach it at
		// the host's address.
		ServingIPs: []string{hostIP},
		APIServerFlags: []string{
			// The kubelets are in other network namespaces: loopback is
			// not theirs. They reach the host through the router at
			// hostIP, and check the certificate as "localhost" (the
			// serving certificate names 127.0.0.1 and localhost only).
			"--bind-address=0.0.0.0",
			"--advertise-address=" + hostIP,
			// kubectl exec/logs: the kubelets' InternalIP is the one
			// address the host routes to.
			"--kubelet-preferred-address-types=InternalIP",
			// kube-apiserver publishes its client CAs in
			// kube-system/extension-apiserver-authentication only with
			// these flags; the CCM's secure port reads them, as in a
			// real cluster. (No client presents a certificate here.)
			"--client-ca-file=" + clientCA,
			"--requestheader-client-ca-file=" + clientCA,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--requestheader-allowed-names=front-proxy-client",
		},
	}
	if c.DualStack {
		eo.APIServerFlags = append(eo.APIServerFlags, "--service-cluster-ip-range=10.0.0.0/24,"+serviceNet6)
	}
	c.Env, err = testenv.Start(ctx, eo)
	if err != nil {
		return nil, err
	}
	logf("cluster: kube-apiserver up after %s", time.Since(began).Round(time.Millisecond))
	if c.Client, err = kubernetes.NewForConfig(c.Env.Config); err != nil {
		return nil, err
	}
	kubeconfig, err := c.nodeKubeconfig()
	if err != nil {
		return nil, err
	}
	imgs, err := baseImages(bins["pause"])
	if err != nil {
		return nil, err
	}
	if opts.Cloud != nil {
		more, err := cloudImages(opts.Cloud, metallb)
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, more...)
	}
	if opts.CoreDNS != "" {
		dns, err := corednsImageOf(opts.CoreDNS)
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, dns)
	}
	images, err := writeImageTars(c.Dir, imgs)
	if err != nil {
		return nil, err
	}
	logf("cluster: %d images written after %s", len(images), time.Since(began).Round(time.Millisecond))
	// The nodes start side by side: each one's containerd starts and
	// imports every image (one after the other, the three were started
	// 34 s after the cluster's start; side by side, 27 s). Their cgroups
	// are made first, one by one: a cgroup's cpuset is copied from its
	// parent's, which a sibling making the same parent at once may not
	// have written yet.
	for _, n := range c.Nodes {
		for _, cg := range []string{n.cgroup, n.runtimeCG} {
			if err := makeCgroup(cg); err != nil {
				return nil, err
			}
		}
	}
	var nodes errgroup.Group
	for i, n := range c.Nodes {
		var extra []string
		if opts.Cloud != nil {
			extra = append(extra, "--cloud-provider=external")
			if i == 0 {
				extra = append(extra, "--register-with-taints="+controlPlaneLabel+"=:NoSchedule")
			}
		}
		nodes.Go(func() error {
			return c.startNode(ctx, n, kubeconfig, bins["kubelet"], images, opts.CoreDNS != "", extra)
		})
	}
	if err := nodes.Wait(); err != nil {
		return nil, err
	}
	if opts.KubeProxy || opts.Scheduler {
		if err := c.startControllers(assets, opts.Scheduler); err != nil {
			return nil, err
		}
	}
	if opts.KubeProxy {
		for _, n := range c.Nodes {
			if err := c.startKubeProxy(n, kubeconfig, assets); err != nil {
				return nil, err
			}
		}
	}
	logf("cluster: %d nodes started after %s", len(c.Nodes), time.Since(began).Round(time.Millisecond))
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	logf("cluster: %d nodes Ready after %s (work dir %s)", len(c.Nodes), time.Since(began).Round(time.Millisecond), c.Dir)
	if opts.Cloud != nil && opts.Cloud.FRR != "" {
		if err := c.startFRR(opts.Cloud); err != nil {
			return nil, err
		}
	}
	if opts.Cloud != nil {
		if err := c.installCloud(ctx, opts.Cloud, metallb); err != nil {
			return nil, err
		}
	}
	if opts.CoreDNS != "" {
		if err := c.installDNS(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// nodeKubeconfig writes the kubeconfig the kubelets use: the admin token
// (phase 1: no node authorizer, no bootstrap), the host's address as seen
// from the nodes, and the name the serving certificate carries.
func (c *Cluster) nodeKubeconfig() (string, error) {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(c.Env.Config.Host, "https://"))
	if err != nil {
		return "", fmt.Errorf("cluster: kube-apiserver address %q: %w", c.Env.Config.Host, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{
		Server:                   "https://" + net.JoinHostPort(hostIP, port),
		CertificateAuthorityData: c.Env.Config.CAData,
		TLSServerName:            "localhost",
	}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.Env.Config.BearerToken}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "admin"}
	cfg.CurrentContext = "c"
	path := filepath.Join(c.Dir, "node-kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("cluster: writing %s: %w", path, err)
	}
	return path, nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			for _, p := range []*process{n.containerd, n.kubelet, n.kubeProxy, c.kcm, c.scheduler} {
				if p.exited() {
					return false, p.earlyExit()
				}
			}
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				last = n.Name + ": " + err.Error()
				return false, nil
			}
			ready := false
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					ready = cond.Status == corev1.ConditionTrue
					last = n.Name + ": Ready=" + string(cond.Status) + " " + cond.Reason + ": " + cond.Message
				}
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cluster: nodes not Ready (last: %s): %w", last, err)
	}
	return nil
}

// KubeconfigPath is an admin kubeconfig for kubectl on the host.
func (c *Cluster) KubeconfigPath() string { return c.Env.KubeconfigPath }

// Stop deletes the pods on the nodes (so containerd tears their sandboxes
// down: CNI, shims), stops the kubelets and containerds, kills anything left
// in the cluster's cgroups, unmounts what is mounted under the work
// directory, removes the cgroups and network namespaces, stops the control
// plane and removes the work directory if Start made it. It may be called
// more than once; it logs what it could not clean up.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		if c.fabricStop != nil {
			close(c.fabricStop)
			<-c.fabricDone
		}
		c.strays.Stop()
		// Only live kubelets confirm a deletion: with one dead, waiting is
		// 30 s for nothing, and the cgroup sweep below does the work.
		alive := c.Client != nil
		for _, n := range c.Nodes {
			alive = alive && n.kubelet != nil && !n.kubelet.exited() && !n.containerd.exited()
		}
		// The controllers first: a DaemonSet's or Deployment's pods
		// deleted below would come back.
		c.scheduler.stop(0)
		c.kcm.stop(0)
		if !c.removeDir && c.Client != nil {
			c.savePodLogs()
			c.saveMetalLBObjects()
		}
		if alive {
			c.deletePods()
		}
		for _, n := range c.Nodes {
			n.kubeProxy.stop(0)
			n.kubelet.stop(5 * time.Second)
		}
		for _, n := range c.Nodes {
			n.containerd.stop(5 * time.Second)
		}
		for _, f := range c.frrs {
			f.Stop()
		}
		// Shims and containers outlive containerd (they are re-parented),
		// but all of them sit in the cluster's cgroups.
		if n, err := killCgroup(c.cgroupTop); err != nil {
			c.logf("cluster: %v", err)
		} else if n > 0 {
			c.logf("cluster: killed %d processes left in the cluster's cgroups (shims, containers)", n)
		}
		if err := unmountUnder(c.Dir); err != nil {
			c.logf("cluster: %v", err)
		}
		if err := removeCgroup(c.cgroupTop); err != nil {
			c.logf("cluster: %v", err)
		}
		// Deleting a netns only drops its name: the kernel destroys it (and
		// the interfaces in it, the host veth's peer among them) later and
		// asynchronously. Deleting the host's end at once takes the pair
		// and the host's routes with it, so a new cluster can start now.
		// (It is not there if Start failed early: no error to report.)
		_ = exec.Command("ip", "link", "del", c.hostVeth).Run()
		for _, n := range c.Nodes {
			c.runLog("ip", "netns", "del", n.NetNS)
		}
		for _, r := range c.Routers {
			c.runLog("ip", "netns", "del", r.Name)
		}
		if c.ClientNS != "" {
			c.runLog("ip", "netns", "del", c.ClientNS)
		}
		c.runLog("ip", "netns", "del", c.router)
		if c.Emu != nil {
			c.Emu.Close()
		}
		removeLeftovers(c.Dir, c.id, c.shimsWere, c.resultsWere)
		removeSharedDirs(c.existed)
		if c.Env != nil {
			c.Env.Stop()
		}
		if c.removeDir {
			if err := os.RemoveAll(c.Dir); err != nil {
				c.logf("cluster: removing %s: %v", c.Dir, err)
			}
		} else if !c.keepAll {
			freed, err := pruneKept(c.Dir)
			if err != nil {
				c.logf("cluster: pruning %s: %v", c.Dir, err)
			}
			c.logf("cluster: kept %s for its logs (%s; %s of images and node state removed)",
				c.Dir, gib(duBytes(c.Dir)), gib(freed))
		}
		if c.lock != nil {
			c.lock.Close()
		}
	})
}

// savePodLogs writes every container's log (and its previous run's) to
// pod-logs/ in the work directory: the kubelets remove theirs with the
// pods, and a failed run keeps the directory to be read.
// saveMetalLBObjects writes the MetalLB objects (what the CCM's module
// wrote, what MetalLB reports) to metallb-objects.yaml beside the pods'
// logs: what a failed cloud test needs besides them.
func (c *Cluster) saveMetalLBObjects() {
	dyn, err := dynamic.NewForConfig(c.Env.Config)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []byte
	for _, r := range []string{"ipaddresspools", "bgppeers", "bgpadvertisements", "l2advertisements", "communities", "configurationstates", "servicebgpstatuses"} {
		for _, v := range []string{"v1beta1", "v1beta2"} {
			l, err := dyn.Resource(schema.GroupVersionResource{Group: "metallb.io", Version: v, Resource: r}).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, u := range l.Items {
				u.SetManagedFields(nil)
				if y, err := yaml.Marshal(u.Object); err == nil {
					out = append(append(append(out, "---\n"...), y...), '\n')
				}
			}
			break
		}
	}
	if len(out) > 0 {
		_ = os.WriteFile(filepath.Join(c.Dir, "metallb-objects.yaml"), out, 0o644)
	}
}

func (c *Cluster) savePodLogs() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pods, err := c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	dir := filepath.Join(c.Dir, "pod-logs")
	_ = os.MkdirAll(dir, 0o755)
	for _, p := range pods.Items {
		for _, ct := range p.Spec.Containers {
			for _, previous := range []bool{false, true} {
				b, err := c.Client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, Previous: previous}).Do(ctx).Raw()
				if err != nil || len(b) == 0 {
					continue
				}
				name := fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, ct.Name)
				if previous {
					name += ".previous"
				}
				_ = os.WriteFile(filepath.Join(dir, name+".log"), b, 0o644)
			}
		}
	}
	c.logf("cluster: pods' logs saved in %s", dir)
}

// deletePods deletes every pod on the cluster's nodes and waits (up to 30
// s) until the kubelets confirmed: by then the sandboxes are stopped, so
// their CNI state, netns mounts and shims are gone the normal way.
func (c *Cluster) deletePods() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		c.logf("cluster: listing pods: %v", err)
		return
	}
	grace := int64(1)
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		_ = c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		c.logf("cluster: pods not gone after 30s; killing what is left")
	}
}

func (c *Cluster) runLog(name string, args ...string) {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		c.logf("cluster: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNS runs a command in a network namespace (nsenter, see the package
// documentation).
func inNS(ns string, name string, args ...string) error {
	return run("nsenter", append([]string{"--net=/run/netns/" + ns, "--", name}, args...)...)
}

// outputInNS is inNS returning the command's combined output.
func outputInNS(ns string, name string, args ...string) ([]byte, error) {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, "--", name}, args...)...).CombinedOutput()
}
