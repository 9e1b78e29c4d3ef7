package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metallbv1beta2 "go.universe.tf/metallb/api/v1beta2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ccmUser is the CCM's ServiceAccount as a token user.
var ccmUser = ServiceAccountUser(metav1.NamespaceSystem, "cloud-controller-manager")

// TestCluster starts one server with every option on and checks what tests
// built on it rely on. The subtests share it (a start costs seconds).
func TestCluster(t *testing.T) {
	extra := filepath.Join(t.TempDir(), "widgets.yaml")
	if err := os.WriteFile(extra, []byte(crdA), 0o644); err != nil {
		t.Fatal(err)
	}
	env := New(t, Options{AuditLog: true, Users: []User{{Name: "alice", Groups: []string{"team-a"}}, ccmUser}, CRDPaths: []string{extra}})
	t.Logf("start-to-ready: %s", env.StartDuration.Round(time.Millisecond))
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)

	t.Run("server version is the pinned one", func(t *testing.T) {
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		client := requiredVersion(t, filepath.Join("..", "..", "go.mod"), "k8s.io/client-go")
		if v.GitVersion != KubernetesVersion || "v0."+v.Minor != minorOf(client) {
			t.Fatalf("server %s (minor %s), KubernetesVersion %s, client-go %s: must agree", v.GitVersion, v.Minor, KubernetesVersion, client)
		}
	})

	t.Run("cluster basics exist", func(t *testing.T) {
		for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "default", MetalLBNamespace} {
			got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("namespace %s: %v", ns, err)
			}
			if got.Labels[corev1.LabelMetadataName] != ns {
				t.Errorf("namespace %s lacks the %s label a cluster sets", ns, corev1.LabelMetadataName)
			}
		}
		for gv, want := range map[string][]string{
			"metallb.io/v1beta1": {"ipaddresspools", "bgpadvertisements", "bgppeers", "l2advertisements", "bfdprofiles", "communities"},
			"metallb.io/v1beta2": {"bgppeers"},
			"example.com/v1":     {"widgets"}, // from Options.CRDPaths
		} {
			list, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				t.Fatalf("discovery of %s: %v", gv, err)
			}
			var have []string
			for _, r := range list.APIResources {
				have = append(have, r.Name)
			}
			for _, w := range want {
				if !slices.Contains(have, w) {
					t.Errorf("discovery of %s lacks %s: %v", gv, w, have)
				}
			}
		}
		svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP != kubernetesSvcIP {
			t.Errorf("default/kubernetes ClusterIP = %s, want %s", svc.Spec.ClusterIP, kubernetesSvcIP)
		}
	})

	t.Run("node and LoadBalancer service", func(t *testing.T) {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"topology.kubernetes.io/region": "da"}},
			Spec:       corev1.NodeSpec{ProviderID: "equinixmetal://0b6e8e3c-9d1a-4c1c-9d7b-0a4e7c1f2a10"},
		}
		node, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.2.3"}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}

		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
			},
		}
		svc, err = cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !netip.MustParsePrefix(serviceCIDR).Contains(ip) {
			t.Errorf("ClusterIP %q is not in %s", svc.Spec.ClusterIP, serviceCIDR)
		}
		if svc.Spec.Ports[0].NodePort == 0 {
			t.Error("the server allocated no NodePort")
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "147.75.1.10"}}
		if _, err := cs.CoreV1().Services("default").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ing := got.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != "147.75.1.10" {
			t.Errorf("status.loadBalancer.ingress = %+v", ing)
		}
	})

	mc := metallbClient(t, env)

	t.Run("MetalLB objects are accepted", func(t *testing.T) {
		pool := &metallbv1beta1.IPAddressPool{
			ObjectMeta: metav1.ObjectMeta{Name: "eip-147-75-1-10", Namespace: MetalLBNamespace},
			Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"147.75.1.10/32"}, AutoAssign: new(false)},
		}
		peer := &metallbv1beta2.BGPPeer{
			ObjectMeta: metav1.ObjectMeta{Name: "worker-1-peer-0", Namespace: MetalLBNamespace},
			Spec: metallbv1beta2.BGPPeerSpec{
				MyASN: 65000, ASN: 65530, Address: "169.254.255.1", Port: 179,
				Password:      "not-a-real-secret",
				NodeSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"kubernetes.io/hostname": "worker-1"}}},
			},
		}
		adv := &metallbv1beta1.BGPAdvertisement{
			ObjectMeta: metav1.ObjectMeta{Name: "eip-147-75-1-10", Namespace: MetalLBNamespace},
			Spec:       metallbv1beta1.BGPAdvertisementSpec{IPAddressPools: []string{pool.Name}},
		}
		for _, obj := range []client.Object{pool, peer, adv} {
			if err := mc.Create(ctx, obj); err != nil {
				t.Fatalf("creating %T: %v", obj, err)
			}
		}
		var gotAdv metallbv1beta1.BGPAdvertisement
		if err := mc.Get(ctx, client.ObjectKeyFromObject(adv), &gotAdv); err != nil {
			t.Fatal(err)
		}
		// The schema's defaults are applied by the real server.
		if l := gotAdv.Spec.AggregationLength; l == nil || *l != 32 {
			t.Errorf("aggregationLength = %v, want the CRD default 32", l)
		}
		var gotPeer metallbv1beta2.BGPPeer
		if err := mc.Get(ctx, client.ObjectKeyFromObject(peer), &gotPeer); err != nil {
			t.Fatal(err)
		}
		if gotPeer.Spec.ASN != 65530 || gotPeer.Spec.Address != "169.254.255.1" {
			t.Errorf("BGPPeer read back as %+v", gotPeer.Spec)
		}
	})

	t.Run("invalid MetalLB objects are rejected by the CRD schema", func(t *testing.T) {
		meta := func(name string) metav1.ObjectMeta {
			return metav1.ObjectMeta{Name: name, Namespace: MetalLBNamespace}
		}
		tests := []struct {
			name    string
			obj     client.Object
			wantMsg string
		}{
			{"pool without addresses", &metallbv1beta1.IPAddressPool{ObjectMeta: meta("no-addresses")},
				"spec.addresses: Required value"},
			{"peer port above the maximum", &metallbv1beta2.BGPPeer{ObjectMeta: meta("bad-port"), Spec: metallbv1beta2.BGPPeerSpec{MyASN: 65000, ASN: 65530, Address: "169.254.255.1", Port: 20000}},
				"spec.peerPort: Invalid value: 20000"},
			{"peer connect time below the CEL rule", &metallbv1beta2.BGPPeer{ObjectMeta: meta("bad-connect"), Spec: metallbv1beta2.BGPPeerSpec{MyASN: 65000, ASN: 65530, Address: "169.254.255.1", ConnectTime: &metav1.Duration{Duration: 500 * time.Millisecond}}},
				"connect time should be between 1 seconds to 65535"},
			{"peer dynamicASN outside the enum", &metallbv1beta2.BGPPeer{ObjectMeta: meta("bad-dynamic"), Spec: metallbv1beta2.BGPPeerSpec{MyASN: 65000, Address: "169.254.255.1", DynamicASN: "sideways"}},
				`spec.dynamicASN: Unsupported value: "sideways"`},
			{"advertisement aggregation length 0", &metallbv1beta1.BGPAdvertisement{ObjectMeta: meta("bad-aggregation"), Spec: metallbv1beta1.BGPAdvertisementSpec{AggregationLength: new(int32(0))}},
				"spec.aggregationLength: Invalid value: 0"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := mc.Create(ctx, tt.obj)
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("create err = %v; want Invalid mentioning %q", err, tt.wantMsg)
				}
			})
		}
	})

	t.Run("token users are bound by RBAC", func(t *testing.T) {
		aliceCfg, err := env.UserConfig("alice")
		if err != nil {
			t.Fatal(err)
		}
		alice := kubernetes.NewForConfigOrDie(aliceCfg)
		if _, err := alice.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice listed services without a binding: err = %v", err)
		}
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "svc-reader", Namespace: "default"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list"}}},
		}
		if _, err := cs.RbacV1().Roles("default").Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a-svc-reader", Namespace: "default"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "team-a"}},
		}
		if _, err := cs.RbacV1().RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The RBAC authorizer reads bindings from an informer: poll.
		eventually(t, "alice may list services through her group", func() error {
			_, err := alice.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
			return err
		})
		if _, err := alice.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("alice listed nodes with a Role for services only: err = %v", err)
		}

		// A ServiceAccount subject binds the ServiceAccountUser. (Not to
		// the aggregated "view" role: with no controller-manager to
		// aggregate them, admin/edit/view have no rules.)
		cr := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "ccm-services"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list"}}},
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "ccm-services"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "cloud-controller-manager", Namespace: metav1.NamespaceSystem}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ccmCfg, err := env.UserConfig(ccmUser.Name)
		if err != nil {
			t.Fatal(err)
		}
		ccm := kubernetes.NewForConfigOrDie(ccmCfg)
		eventually(t, "the CCM's ServiceAccount user may list services cluster-wide", func() error {
			_, err := ccm.CoreV1().Services("").List(ctx, metav1.ListOptions{})
			return err
		})
		if _, err := env.UserConfig("mallory"); err == nil || !strings.Contains(err.Error(), "add it to Options.Users") {
			t.Errorf("UserConfig(unknown) err = %v", err)
		}
	})

	t.Run("audit log lists who called what", func(t *testing.T) {
		want := []APICall{
			{User: "alice", Verb: "list", APIVersion: "v1", Resource: "services", Namespace: "default", Code: 403},
			{User: "alice", Verb: "list", APIVersion: "v1", Resource: "services", Namespace: "default", Code: 200},
			{User: "alice", Verb: "list", APIVersion: "v1", Resource: "nodes", Code: 403},
			{User: ccmUser.Name, Verb: "list", APIVersion: "v1", Resource: "services", Code: 200},
		}
		eventually(t, "the audit log has the users' calls", func() error {
			events, err := env.AuditEvents()
			if err != nil {
				return err
			}
			calls := Calls(events)
			for i := range calls {
				if calls[i].User == "alice" && calls[i].UserAgent == "" {
					return fmt.Errorf("alice's call %s has no user agent", calls[i])
				}
				calls[i].UserAgent = "" // compared apart: it names the Go client's version
			}
			for _, w := range want {
				if !slices.Contains(calls, w) {
					return fmt.Errorf("no %s among %d calls, alice's: %v", w, len(calls), CallsBy(calls, "alice"))
				}
			}
			return nil
		})
	})

	t.Run("kubeconfig reaches the server as each user", func(t *testing.T) {
		for _, tc := range []struct{ context, wantUser string }{{"", adminUser.Name}, {"alice", "alice"}} {
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: env.KubeconfigPath},
				&clientcmd.ConfigOverrides{CurrentContext: tc.context}).ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("context %q: %v", tc.context, err)
			}
			if got := review.Status.UserInfo.Username; got != tc.wantUser {
				t.Errorf("context %q authenticates as %q, want %q", tc.context, got, tc.wantUser)
			}
		}
	})
}

// metallbClient is a typed client for MetalLB's Go types; it maps kinds to
// resources through discovery, which Start made sure lists the CRDs.
func metallbClient(t *testing.T, env *Env) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, metallbv1beta1.AddToScheme, metallbv1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually retries f for up to 30 s (RBAC and audit are eventually
// consistent); it is a deadline for a hang, not a timing assertion.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: never happened: %v", what, last)
	}
}

// Several servers at once (as parallel `go test` of several packages runs
// them) get their own ports and directories and do not disturb each other.
func TestParallelEnvs(t *testing.T) {
	const n = 2
	envs := make([]*Env, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			env, err := Start(t.Context(), Options{Logf: t.Logf})
			if err != nil {
				t.Error(err)
				return
			}
			envs[i] = env
		})
	}
	wg.Wait()
	for _, env := range envs {
		if env != nil {
			t.Cleanup(env.Stop)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if envs[0].Config.Host == envs[1].Config.Host || envs[0].Dir == envs[1].Dir {
		t.Fatalf("two servers share %s / %s", envs[0].Config.Host, envs[0].Dir)
	}
	// An object made in one is not in the other.
	a, b := kubernetes.NewForConfigOrDie(envs[0].Config), kubernetes.NewForConfigOrDie(envs[1].Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-first"}}
	if _, err := a.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CoreV1().Namespaces().Get(t.Context(), ns.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace from server 1 seen in server 2: err = %v", err)
	}
	dir := envs[0].Dir
	envs[0].Stop()
	if !envs[0].apiserver.exited() || !envs[0].etcd.exited() {
		t.Error("Stop returned with kube-apiserver or etcd still running")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop left the temporary work dir %s: %v", dir, err)
	}
	if _, err := b.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("stopping server 1 disturbed server 2: %v", err)
	}
}

// A port taken between choosing and binding it (another test package's
// server, say) makes Start retry with new ports rather than fail.
func TestTakenPortIsRetried(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	var mu sync.Mutex
	handedOut := map[int]bool{} // by request size: etcd asks for 2, kube-apiserver for 1
	picker := func(n int) ([]int, error) {
		mu.Lock()
		defer mu.Unlock()
		if handedOut[n] {
			return freePorts(n)
		}
		handedOut[n] = true
		ports, err := freePorts(n)
		if err != nil {
			return nil, err
		}
		ports[0] = takenPort
		return ports, nil
	}
	var logMu sync.Mutex
	var logs []string
	env := New(t, Options{KeepDir: true, pickPorts: picker, Logf: func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
		t.Logf(format, args...)
	}})
	joined := strings.Join(logs, "\n")
	for _, want := range []string{"etcd port taken", "kube-apiserver port taken"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q in the start-up log:\n%s", want, joined)
		}
	}
	if strings.HasSuffix(env.Config.Host, fmt.Sprintf(":%d", takenPort)) {
		t.Errorf("server claims the taken port %d", takenPort)
	}

	// KeepDir keeps the logs after Stop, for a person to read.
	env.Stop()
	t.Cleanup(func() { os.RemoveAll(env.Dir) })
	for _, name := range []string{"etcd.log", "kube-apiserver.log", "kubeconfig"} {
		if fi, err := os.Stat(filepath.Join(env.Dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("KeepDir: %s not kept: %v", name, err)
		}
	}
}

// A CRD the server rejects fails Start with the server's reason, and leaves
// nothing running.
func TestInvalidExtraCRDFailsStart(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(crdB, "scope: Cluster", "scope: Galaxy", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "work")
	env, err := Start(t.Context(), Options{Dir: dir, CRDPaths: []string{bad}})
	if err == nil {
		env.Stop()
		t.Fatal("Start accepted a CRD with scope Galaxy")
	}
	if !strings.Contains(err.Error(), "creating CRD gadgets.example.com") || !strings.Contains(err.Error(), "spec.scope") {
		t.Fatalf("err = %v; want it to name the CRD and the bad field", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "kube-apiserver.log")); statErr != nil {
		t.Errorf("the logs of the failed start are gone: %v", statErr)
	}
}

// fatalTB records how New gives up, instead of ending the real test.
type fatalTB struct {
	testing.TB
	fatal   string
	skipped bool
}

type fatalStop struct{}

func (f *fatalTB) Helper()                   {}
func (f *fatalTB) Logf(string, ...any)       {}
func (f *fatalTB) Cleanup(func())            {}
func (f *fatalTB) Fatal(args ...any)         { f.fatal = fmt.Sprint(args...); panic(fatalStop{}) }
func (f *fatalTB) Fatalf(s string, a ...any) { f.fatal = fmt.Sprintf(s, a...); panic(fatalStop{}) }
func (f *fatalTB) Skip(...any)               { f.skipped = true; panic(fatalStop{}) }
func (f *fatalTB) Skipf(string, ...any)      { f.skipped = true; panic(fatalStop{}) }
func (f *fatalTB) SkipNow()                  { f.skipped = true; panic(fatalStop{}) }

func TestMissingBinariesFailNotSkip(t *testing.T) {
	dir := t.TempDir()
	tb := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != (fatalStop{}) {
				panic(r)
			}
		}()
		New(tb, Options{AssetsDir: dir})
	}()
	want := "kube-apiserver not found in " + dir + ": run make k8s-bins"
	if tb.skipped || !strings.Contains(tb.fatal, want) {
		t.Fatalf("New without binaries: skipped=%v fatal=%q; want a failure containing %q", tb.skipped, tb.fatal, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("a failed start wrote into the assets dir: %v %v", entries, err)
	}
}
