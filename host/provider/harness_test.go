package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbhosts"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// ccmUser is who the CCM acts as in these tests: an admin, so a missing RBAC
// rule shows up as one clear failure of the RBAC check at the end instead
// of a CCM that silently retries.
const ccmUser = "equinix-ccm-under-test"

// planUser is who `plan` acts as: an admin too, so that the audit log, not
// a lack of rights, shows that it writes nothing.
const planUser = "equinix-ccm-plan"

// testUsers are the token users of every test apiserver here.
var testUsers = []testenv.User{{Name: ccmUser, Groups: []string{"system:masters"}}, {Name: planUser, Groups: []string{"system:masters"}}}

// harness is the CCM's controllers in process against a real kube-apiserver
// and the Equinix Metal emulator.
type harness struct {
	t     testing.TB
	env   *testenv.Env
	emu   *emulator.Emulator
	kube  kubernetes.Interface // admin, for the test's own reads and writes
	cloud *Cloud
	cfg   *config.Config
	// settings are the cloud-config fields cfg was loaded from.
	settings map[string]any
	stop     context.CancelFunc
	done     chan struct{}
	ccm      *rest.Config
}

type harnessOptions struct {
	seed     *emulator.Seed
	emu      *emulator.Emulator // reuse (restart tests)
	env      *testenv.Env       // reuse (restart tests)
	settings map[string]any     // cloud-config fields on top of the defaults
	workers  int
}

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, env: o.env, emu: o.emu}
	if h.env == nil {
		h.env = testenv.New(t, testenv.Options{AuditLog: true, Users: testUsers})
	}
	if h.emu == nil {
		seed := o.seed
		if seed == nil {
			seed = testSeed(3)
		}
		h.emu = emulator.StartForTest(t, seed, emulator.Options{})
	}
	h.kube = kubernetes.NewForConfigOrDie(h.env.Config)

	settings := map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": h.emu.URL(),
		"loadbalancer": "metallb:///metallb-system", "cacheRefreshPeriod": "10m",
		"moduleCacheDir": t.TempDir(),
	}
	for k, v := range o.settings {
		settings[k] = v
	}
	b, _ := json.Marshal(settings)
	cfg, err := config.Load(config.Sources{CloudConfig: b, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h.cfg, h.settings = cfg, settings
	h.cloud, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ccm, err = h.env.UserConfig(ccmUser)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan struct{})
	// The cloud-provider controllers, as the binary runs them: Initialize,
	// then SetInformers with the controllers' factory, which trims its
	// Services and Nodes (informertrim) and starts the provider's loops on
	// it, so every test runs on what the binary keeps and shares.
	kube := kubernetes.NewForConfigOrDie(h.ccm)
	factory := informers.NewSharedInformerFactory(kube, 0)
	h.cloud.initialize(ctx, h.ccm)
	h.cloud.SetInformers(factory)
	metrics := controllersmetrics.NewControllerManagerMetrics("test")
	svc, err := servicecontroller.New(h.cloud, kube, h.cloud.ServiceInformer(factory.Core().V1().Services()), lbhosts.NewInformer(factory.Core().V1().Nodes()), "test", utilfeature.DefaultFeatureGate)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := nodecontroller.NewCloudNodeController(factory.Core().V1().Nodes(), kube, h.cloud, time.Minute, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	workers := o.workers
	if workers == 0 {
		workers = DefaultConcurrentServiceSyncs
	}
	factory.Start(ctx.Done())
	go svc.Run(ctx, workers, metrics)
	go func() {
		defer close(h.done)
		nodes.RunWithContext(ctx, metrics)
	}()
	t.Cleanup(h.Stop)
	return h
}

// Stop ends the CCM (as a crash or a restart would).
func (h *harness) Stop() {
	if h.stop == nil {
		return
	}
	h.stop()
	<-h.done
	h.stop = nil
}

// testSeed is a project with n devices named node-0..n-1 in metro da.
func testSeed(n int) *emulator.Seed {
	s := emulator.DefaultSeed()
	for i := 0; i < n; i++ {
		s.Devices = append(s.Devices, emulator.DeviceSeed{Hostname: fmt.Sprintf("node-%d", i), Metro: "da"})
	}
	return s
}

// addNode registers a Node as a kubelet with --cloud-provider=external does.
func (h *harness) addNode(name string, labels map[string]string) {
	h.t.Helper()
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}},
	}
	if _, err := h.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) addService(name string, annotations map[string]string, lbIP string) *v1.Service {
	h.t.Helper()
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerIP: lbIP,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	out, err := h.kube.CoreV1().Services("default").Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// eventually polls cond until it is true or the deadline passes; the
// deadline is generous because a loaded 2-core machine is slow, and the
// test reports what it last saw.
func (h *harness) eventually(what string, cond func() (bool, string)) {
	h.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		h.t.Fatalf("%s: never happened; last seen: %s", what, last)
	}
}

func (h *harness) clusterID() string {
	ns, err := h.kube.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return string(ns.UID)
}

func (h *harness) serviceIP(name string) (string, string) {
	s, err := h.kube.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", err.Error()
	}
	if len(s.Status.LoadBalancer.Ingress) == 0 {
		return "", "no ingress yet; events: " + h.events(name)
	}
	return s.Status.LoadBalancer.Ingress[0].IP, ""
}

func (h *harness) events(name string) string {
	list, err := h.kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return strings.Join(out, " | ")
}

// checkRBAC asserts that every API call the CCM made is allowed by the
// least-privilege RBAC in deploy/ (MetalLB overlay).
func (h *harness) checkRBAC() {
	h.t.Helper()
	h.checkRBACOf("overlays/metallb")
}

// checkRBACOf is checkRBAC against the RBAC of another kustomization.
func (h *harness) checkRBACOf(overlay string) {
	h.t.Helper()
	objs, err := deploycheck.Render(overlay)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := deploycheck.Install(context.Background(), h.env.Config, deploycheck.RBACObjects(objs)); err != nil {
		h.t.Fatal(err)
	}
	h.checkInstalledRBAC()
}

// checkInstalledRBAC: every call the CCM made (the audit log) is one the
// RBAC objects already in the cluster allow its ServiceAccount.
func (h *harness) checkInstalledRBAC() {
	h.t.Helper()
	events, err := h.env.AuditEvents()
	if err != nil {
		h.t.Fatal(err)
	}
	calls := testenv.CallsBy(testenv.Calls(events), ccmUser)
	if len(calls) == 0 {
		h.t.Fatal("the audit log shows no call by the CCM")
	}
	denied, err := deploycheck.CheckAllowed(context.Background(), h.kube, calls)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, d := range denied {
		h.t.Errorf("the CCM made a call the installed RBAC does not allow: %s", d)
	}
}
