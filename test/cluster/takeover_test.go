//go:build cluster && linux

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/guide"
)

// TestCloudTakeOver is the switch from the upstream CCM as users meet it,
// made with the migration guide's Helm path as printed: the cluster starts
// as upstream v3.8.1 left it (its five Services' Elastic IPs announced by
// MetalLB from upstream's own objects; upstream.go) with a release of
// upstream's own chart (whose DaemonSet cannot run here: its image is not
// on this machine), and under a client that never stops asking every one
// of those addresses the guide's commands upgrade that release to this
// chart, whose Deployment takes over. No request fails, no BGP session
// restarts, no route loses a next hop, Equinix sees no reservation
// requested or released, every Service keeps its address, upstream's
// pools become the CCM's, and a Service created afterwards gets an
// address and answers. Then the guide's rollback brings upstream's
// release back, again without a failed request.
func TestCloudTakeOver(t *testing.T) {
	c := startUpstream(t)
	ctx := context.Background()
	if err := c.InstallUpstreamRelease(ctx); err != nil {
		t.Fatal(err)
	}
	ours, err := PublishedChart()
	if err != nil {
		t.Fatal(err)
	}
	sh := &guide.Shell{T: t, Ctx: ctx, Kubeconfig: c.Env.KubeconfigPath, Kube: c.Client, Chart: ours,
		Answers: map[string]string{"RELEASE": UpstreamRelease, "NS": CCMNamespace},
		Vars:    map[string]string{}, Files: map[string][]byte{}}
	takeOver(t, c, takeOverPath{
		name: "Helm",
		switchOver: func() {
			if _, err := sh.RunAll(guide.Commands(t, guide.MigrationGuide, guide.HelmSwitch), 0); err != nil {
				t.Fatal(err)
			}
		},
		rollback: func() {
			sh.Answers["<revision>"] = "1"
			if _, err := sh.RunAll(guide.Commands(t, guide.MigrationGuide, guide.Rollback), 0); err != nil {
				t.Fatal(err)
			}
		},
		upstreamDaemonSet: UpstreamRelease + "-cloud-provider-equinix-metal",
	})
}

// TestCloudTakeOverKubectl is the same switch for a user who installed
// upstream with kubectl, as its README says (the Secret
// metal-cloud-config, then upstream's deployment.yaml: UpstreamManifest):
// the migration guide's kubectl blocks run as printed, with the real
// kubectl, where bin/deploy is what `make image` wrote beside the image
// under test. That applies this repository's kustomize manifests, not the
// chart, so their Deployment is what takes over here.
func TestCloudTakeOverKubectl(t *testing.T) {
	c := startUpstream(t)
	ctx := context.Background()
	kubectl, err := findKubectl()
	if err != nil {
		t.Fatalf("no kubectl: %v (make cluster-test builds it)", err)
	}
	manifest, err := c.InstallUpstreamManifest(ctx, kubectl)
	if err != nil {
		t.Fatal(err)
	}
	// The guide's blocks name bin/deploy, the manifests `make image`
	// stamped with the image it built: they run in a directory whose
	// bin/deploy is a copy of those beside the image under test
	// (METAL_CCM_CLUSTER_DEPLOY; make ci's image is not make
	// cluster-image's). The nodes have that image under CCMImage.
	root := t.TempDir()
	deployDir := os.Getenv("METAL_CCM_CLUSTER_DEPLOY")
	if deployDir == "" {
		deployDir = filepath.Join(repoRoot(), "bin", "deploy")
	}
	if err := os.CopyFS(filepath.Join(root, "bin", "deploy"), os.DirFS(deployDir)); err != nil {
		t.Fatalf("%v (make cluster-image writes bin/deploy)", err)
	}
	image, err := deploymentImage(kubectl, filepath.Join(root, "bin", "deploy", "overlays", "metallb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.TagImage(CCMImage, image); err != nil {
		t.Fatal(err)
	}
	takeOver(t, c, takeOverPath{
		name: "kubectl",
		switchOver: func() {
			runDocBlockIn(t, c, root, migrationGuideDoc, "TestCloudTakeOverKubectl/switch", nil)
		},
		rollback: func() {
			runDocBlockIn(t, c, root, migrationGuideDoc, "TestCloudTakeOverKubectl/rollback",
				map[string]string{"<upstream v3.8.1 deployment.yaml>": manifest})
			// Upstream's rights are back, bound to its ServiceAccount.
			crb, err := c.Client.RbacV1().ClusterRoleBindings().Get(ctx, "cloud-provider-equinix-metal", metav1.GetOptions{})
			if err != nil || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "cloud-provider-equinix-metal" {
				t.Errorf("upstream's ClusterRoleBinding after the guide's rollback: %v, error %v; want it bound to upstream's ServiceAccount", crb, err)
			}
			if _, err := c.Client.CoreV1().ServiceAccounts(CCMNamespace).Get(ctx, "cloud-provider-equinix-metal", metav1.GetOptions{}); err != nil {
				t.Errorf("upstream's ServiceAccount after the guide's rollback: %v", err)
			}
		},
		upstreamDaemonSet: "cloud-provider-equinix-metal",
	})
}

// startUpstream starts a cloud cluster as upstream v3.8.1 left it
// (upstream's leftovers, no CCM).
func startUpstream(t *testing.T) *Cluster {
	o := cloudOptions(t)
	o.Upstream = filepath.Join(repoRoot(), "host", "provider", "testdata", "upstream-v3.8.1", "crd")
	return startCloud(t, o)
}

// repoRoot is the repository's root directory.
func repoRoot() string { return filepath.Dir(filepath.Dir(chartDir())) }

// takeOverPath is one of the migration guide's ways to switch: its
// commands, those of its rollback, and the DaemonSet the rollback brings
// back.
type takeOverPath struct {
	name                 string
	switchOver, rollback func()
	upstreamDaemonSet    string
}

// takeOver switches c from upstream to this CCM along path, under the
// traffic monitor, and checks what TestCloudTakeOver says.
func takeOver(t *testing.T, c *Cluster, path takeOverPath) {
	ctx := context.Background()
	webPods(t, c)
	before, err := c.UpstreamIngress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 5 {
		t.Fatalf("upstream's Services with an address: %v, want the capture's 5", before)
	}
	names := slices.Sorted(maps.Keys(before))
	m := c.Monitor()
	defer m.Stop()
	begin := m.Mark()
	for _, name := range names {
		url := "http://" + net.JoinHostPort(before[name], "80") + "/hostname"
		if _, err := untilAnswers(c, url, 2*time.Minute); err != nil {
			t.Fatalf("upstream's %s at %s did not answer before the take-over: %v; routers' next hops %v", name, before[name], err, nexthops(t, c, before[name]))
		}
		m.Watch(name, before[name])
	}
	// What flows before: upstream's state alone carries the traffic.
	time.Sleep(10 * time.Second)
	for _, tl := range m.Since(begin) {
		t.Logf("before the take-over: %s", tl.Window(begin))
	}

	c.Emu.ResetCounts()
	ups, err := c.SessionUps()
	if err != nil {
		t.Fatal(err)
	}
	hops := routersNexthops(t, c, before)
	mark := m.Mark()
	path.switchOver()
	t.Logf("the guide's %s commands ran in %s", path.name, time.Since(mark).Round(100*time.Millisecond))
	took, err := waitAdopted(ctx, c, names)
	if err != nil {
		t.Fatalf("%v (%s)", err, c.podSummary(CCMNamespace))
	}
	t.Logf("the CCM owned upstream's %d pools %s after the guide's commands", len(names), took.Round(100*time.Millisecond))
	// Whatever the CCM writes once it leads (its module's objects, node
	// annotations, the control-plane Elastic IP) is done well within this.
	time.Sleep(30 * time.Second)
	end := time.Now()
	// A restarted session withdraws the node's routes at the routers: the
	// CCM writes upstream's BGPPeers as MetalLB already runs them.
	t.Logf("take-over: %d session resets at the routers over %d sessions", sessionResets(t, c, ups), len(ups))
	// Nor does a route lose a next hop: MetalLB's speakers withdraw a
	// Service whose pool no advertisement names, even for a moment, and
	// whether a client's request meets that moment is luck.
	for _, name := range names {
		for _, w := range withdrawals(c, before[name], hops[name], mark, end) {
			t.Errorf("%s at %s: a router lost next hops while the CCM took over: %s", name, before[name], w)
		}
	}
	for _, tl := range m.Between(mark, end) {
		t.Logf("take-over: %s", tl.Window(mark))
		if tl.Failed > 0 {
			t.Errorf("%s: %d requests failed while the CCM took over from upstream, want 0", tl.Target, tl.Failed)
		}
	}
	if res, rel := c.Emu.Count(emulator.RouteRequestIPReservation), c.Emu.Count(emulator.RouteDeleteIP); res != 0 || rel != 0 {
		t.Errorf("taking over: %d reservations requested, %d released; want 0 and 0", res, rel)
	}
	after, err := c.UpstreamIngress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		t.Errorf("Services' addresses after the take-over %v, upstream left %v", after, before)
	}

	// The CCM serves: a new Service gets its own Elastic IP and answers.
	created := time.Now()
	if _, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, LoadBalancerService("after", "web", corev1.ServiceExternalTrafficPolicyCluster), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip, err := serviceIngress(c, "after")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untilAnswers(c, "http://"+net.JoinHostPort(ip, "80")+"/hostname", 2*time.Minute); err != nil {
		t.Fatalf("%v; routers' next hops for %s: %v", err, ip, nexthops(t, c, ip))
	}
	t.Logf("a Service created after the take-over answered at %s %s after its creation", ip, time.Since(created).Round(100*time.Millisecond))
	// What the guide tells a user to look at afterwards says the same.
	served := maps.Clone(before)
	served["after"] = ip
	checkTakeOverByHand(t, c, served)

	// The guide's rollback. Upstream's binary does not run here, so this
	// shows what the rollback itself does to the data plane: nothing.
	m.Watch("after", ip)
	back := m.Mark()
	path.rollback()
	if _, err := c.Client.AppsV1().DaemonSets(CCMNamespace).Get(ctx, path.upstreamDaemonSet, metav1.GetOptions{}); err != nil {
		t.Errorf("upstream's DaemonSet after the guide's rollback: %v", err)
	}
	if _, err := c.Client.AppsV1().Deployments(CCMNamespace).Get(ctx, "cloud-provider-equinix-metal", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("this CCM's Deployment after the guide's rollback: %v, want it gone", err)
	}
	time.Sleep(20 * time.Second)
	for _, tl := range m.Between(back, time.Now()) {
		t.Logf("rollback: %s", tl.Window(back))
		if tl.Failed > 0 {
			t.Errorf("%s: %d requests failed during the guide's rollback, want 0", tl.Target, tl.Failed)
		}
	}
}

// waitAdopted waits until each upstream Service's pool (upstream's name,
// default.<Service>) carries the CCM's owned-by label, and says how long
// that took.
func waitAdopted(ctx context.Context, c *Cluster, names []string) (time.Duration, error) {
	began := time.Now()
	dyn, err := dynamic.NewForConfig(c.Env.Config)
	if err != nil {
		return 0, err
	}
	pools := dyn.Resource(schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}).Namespace(metallbNamespace)
	var last string
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var missing []string
		for _, name := range names {
			p, err := pools.Get(ctx, metav1.NamespaceDefault+"."+name, metav1.GetOptions{})
			if err != nil {
				missing = append(missing, fmt.Sprintf("%s (%v)", name, err))
				continue
			}
			if _, ok := p.GetLabels()[sdk.OwnedLabel]; !ok {
				missing = append(missing, name)
			}
		}
		last = strings.Join(missing, ", ")
		return len(missing) == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("upstream's pools not owned by the CCM: %s: %w", last, err)
	}
	return time.Since(began), nil
}

// routersNexthops are, for each Service (name to address), how many next
// hops each router has for its address now.
func routersNexthops(t *testing.T, c *Cluster, addrs map[string]string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	for name, ip := range addrs {
		out[name] = map[string]int{}
		for _, r := range c.Routers {
			h, err := r.Nexthops(ip)
			if err != nil {
				t.Fatal(err)
			}
			out[name][r.Name] = len(h)
		}
	}
	return out
}

// withdrawals are the routers' route changes for addr between from and to
// that left a router with fewer next hops than it had (hops, by router):
// a deleted route, or one with fewer nexthops.
func withdrawals(c *Cluster, addr string, hops map[string]int, from, to time.Time) []string {
	var out []string
	for _, r := range c.Routers {
		for _, l := range r.RouteChanges(addr, from, to) {
			if _, rest, _ := strings.Cut(l, "] "); strings.HasPrefix(rest, "Deleted ") || strings.Count(l, " via ") < hops[r.Name] {
				out = append(out, r.Name+": "+l)
			}
		}
	}
	return out
}

// migrationGuideDoc is the migration guide, from the repository's root.
const migrationGuideDoc = "docs/migrating-from-upstream.md"

// deploymentImage is the image of the Deployment that `kubectl apply -k
// dir` would create.
func deploymentImage(kubectl, dir string) (string, error) {
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		return "", fmt.Errorf("kubectl kustomize %s: %w (make cluster-image writes bin/deploy)", dir, err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			return "", fmt.Errorf("%s renders no Deployment: %w", dir, err)
		}
		if d.Kind == "Deployment" && len(d.Spec.Template.Spec.Containers) > 0 {
			return d.Spec.Template.Spec.Containers[0].Image, nil
		}
	}
}
