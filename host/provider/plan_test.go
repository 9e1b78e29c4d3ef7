package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/plan"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
	"github.com/metal-ccm/cloud-provider-equinix-metal/policies"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// planRun is one run of Plan, as the plan command makes it, with its text.
type planRun struct {
	res  *plan.Result
	text string
}

// runPlan runs Plan with the given cloud-config fields against env and
// emu as planUser, and checks that it wrote nothing anywhere: the emulator
// saw only GETs, and the apiserver's audit log shows only reads by
// planUser, each with the plan's user agent.
func runPlan(t *testing.T, env *testenv.Env, emu *emulator.Emulator, settings map[string]any) planRun {
	t.Helper()
	b, _ := json.Marshal(settings)
	cfg, err := config.Load(config.Sources{CloudConfig: b, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := NewForPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := env.UserConfig(planUser)
	if err != nil {
		t.Fatal(err)
	}
	before := planCalls(t, env)
	emu.ResetCounts()
	res, err := cloud.Plan(context.Background(), rc)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	for route, n := range emu.Counts() {
		if method, _, _ := strings.Cut(string(route), " "); method != "GET" {
			t.Errorf("plan wrote to Equinix Metal: %d × %s", n, route)
		}
	}
	if emu.TotalRequests() == 0 {
		t.Error("the emulator saw no request from plan")
	}
	checkPlanAudit(t, env, before)
	var buf bytes.Buffer
	if err := plan.WriteText(&buf, res, redact.Default); err != nil {
		t.Fatal(err)
	}
	return planRun{res: res, text: buf.String()}
}

func planCalls(t *testing.T, env *testenv.Env) []testenv.APICall {
	t.Helper()
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	return testenv.CallsBy(testenv.Calls(events), planUser)
}

// checkPlanAudit waits for the plan's calls to reach the audit log (it is
// written asynchronously) and checks each one.
func checkPlanAudit(t *testing.T, env *testenv.Env, before []testenv.APICall) {
	t.Helper()
	var calls []testenv.APICall
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		calls = planCalls(t, env)
		return len(calls) > len(before), nil
	})
	if len(calls) <= len(before) {
		t.Fatal("the audit log shows no call by plan")
	}
	for _, c := range calls {
		switch c.Verb {
		case "get", "list", "watch":
		default:
			t.Errorf("plan made a write: %s", c)
		}
		if !strings.HasPrefix(c.UserAgent, "cloud-provider-equinix-metal-plan") {
			t.Errorf("a call as the plan user without the plan's user agent (%q): %s", c.UserAgent, c)
		}
	}
}

func countEIPs(res *plan.Result, action string) int {
	n := 0
	for _, e := range res.EIPs {
		if e.Action == action {
			n++
		}
	}
	return n
}

func objectActions(res *plan.Result) map[string]int {
	out := map[string]int{}
	for _, o := range res.Objects {
		out[o.Action+" "+o.Kind]++
	}
	return out
}

// TestPlanFreshCluster: nodes initialised (provider IDs), two Services,
// and no Elastic IP, BGP or load-balancer object yet. Plan lists it all.
func TestPlanFreshCluster(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{AuditLog: true, Users: testUsers})
	emu := emulator.StartForTest(t, testSeed(3), emulator.Options{})
	h := &harness{t: t, env: env, emu: emu, kube: kubernetes.NewForConfigOrDie(env.Config)}
	// Nodes as kubelets with --provider-id register them.
	for i := range 3 {
		name := fmt.Sprintf("node-%d", i)
		d, ok := emu.DeviceByHostname(emulator.DefaultProjectID, name)
		if !ok {
			t.Fatalf("no device %s", name)
		}
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: "equinixmetal://" + d.ID}}
		if _, err := h.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"web", "api"} {
		h.addService(name, map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	}
	// web's reservation exists already, as after a crash between reserving
	// and writing the Service: plan adopts it (and would write the
	// address into spec.loadBalancerIP: a captured API-server write).
	webEIP, err := emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: eip.Tags(h.clusterID(), "default", "web")})
	if err != nil {
		t.Fatal(err)
	}
	h.settings = map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": emu.URL(), "moduleCacheDir": t.TempDir(),
	}
	settings := cloneSettings(h.settings, map[string]any{"loadbalancer": "metallb:///metallb-system?crdConfiguration=true"})
	run := runPlan(t, h.env, h.emu, settings)
	res := run.res
	if countEIPs(res, plan.ActionReserve) != 1 || countEIPs(res, plan.ActionAdopt) != 1 || countEIPs(res, plan.ActionSetLoadBalancerIP) != 1 {
		t.Errorf("want api's Elastic IP reserved, web's adopted and written into spec.loadBalancerIP:\n%s", run.text)
	}
	if !strings.Contains(run.text, webEIP.Prefix.Addr().String()) {
		t.Errorf("the adopted address %s is not in the plan:\n%s", webEIP.Prefix.Addr(), run.text)
	}
	for _, e := range res.EIPs {
		if e.Action == plan.ActionReserve && (e.Location != "metro da" || !strings.Contains(e.Reason, "placement policy")) {
			t.Errorf("reserve %s in %q because %q; want metro da, decided by the placement policy", e.Service, e.Location, e.Reason)
		}
	}
	if len(res.BGPSessions) != 3 || len(res.Annotations) != 3 {
		t.Errorf("%d BGP sessions and %d nodes' annotations, want 3 and 3:\n%s", len(res.BGPSessions), len(res.Annotations), run.text)
	}
	// The peers and the addresses come from this sync's own writes: the
	// plan says so rather than guessing.
	if len(res.Later) != 2 || !strings.Contains(run.text, "Known only after this sync") {
		t.Errorf("the plan does not say what is known only after the sync:\n%s", run.text)
	}
	if res.ProjectBGP == "" {
		t.Errorf("the project's BGP is not enabled yet, and the plan does not say it would be:\n%s", run.text)
	}
	if res.ExitCode() != plan.ExitChanges || strings.Contains(run.text, plan.NothingToChange) {
		t.Errorf("exit code %d, want %d:\n%s", res.ExitCode(), plan.ExitChanges, run.text)
	}
	if got := h.emu.ElasticReservations(emulator.DefaultProjectID); len(got) != 1 {
		t.Errorf("%d reservations after plan, want web's only", len(got))
	}
	web, err := h.kube.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if web.Spec.LoadBalancerIP != "" || len(web.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("web changed by plan: spec.loadBalancerIP %q, ingress %v", web.Spec.LoadBalancerIP, web.Status.LoadBalancer.Ingress)
	}
	t.Logf("plan of a fresh cluster:\n%s", run.text)
}

// TestPlanConvergedCluster: after the CCM has done everything, plan has
// nothing to change; a mounted policy that places Elastic IPs elsewhere
// and gives BGP to one node only lists the moves; an orphan is listed.
func TestPlanConvergedCluster(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	for i := range 3 {
		h.addNode(fmt.Sprintf("node-%d", i), nil)
	}
	for _, name := range []string{"web", "api"} {
		h.addService(name, map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	}
	// Two Services sharing one Elastic IP (one sharing key, no port in common).
	for name, proto := range map[string]v1.Protocol{"dns-tcp": v1.ProtocolTCP, "dns-udp": v1.ProtocolUDP} {
		s := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{
				"metal.equinix.com/eip-metro": "da", lbsnapshot.SharingAnnotation: "dns"}},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "dns", Protocol: proto, Port: 53}}},
		}
		if _, err := h.kube.CoreV1().Services("default").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitConverged(h, 4, 3, 3)
	h.Stop()

	t.Run("nothing to change", func(t *testing.T) {
		run := runPlan(t, h.env, h.emu, h.settings)
		if run.res.ExitCode() != plan.ExitNoChanges || !strings.Contains(run.text, plan.NothingToChange) {
			t.Errorf("exit code %d, want 0:\n%s", run.res.ExitCode(), run.text)
		}
	})

	t.Run("a new policy lists the moves", func(t *testing.T) {
		dir := movedPolicies(t)
		run := runPlan(t, h.env, h.emu, cloneSettings(h.settings, map[string]any{"policyDir": dir}))
		res := run.res
		if len(res.Placement) != 4 {
			t.Errorf("%d placement differences, want 4 (one per Service):\n%s", len(res.Placement), run.text)
		}
		for _, p := range res.Placement {
			if p.From != "metro da" || p.To != "metro sv" {
				t.Errorf("placement of %s: %s -> %s, want metro da -> metro sv", p.Service, p.From, p.To)
			}
		}
		var removed []string
		for _, a := range res.Annotations {
			if len(a.Remove) > 0 && len(a.Set) == 0 {
				removed = append(removed, a.Node)
			}
		}
		if strings.Join(removed, ",") != "node-1,node-2" {
			t.Errorf("BGP annotations removed from %v, want node-1 and node-2:\n%s", removed, run.text)
		}
		if acts := objectActions(res); acts["prune BGPPeer"] == 0 {
			t.Errorf("no BGPPeer to prune; objects: %v\n%s", acts, run.text)
		}
		if res.ExitCode() != plan.ExitChanges || countEIPs(res, plan.ActionReserve)+countEIPs(res, plan.ActionRelease) != 0 {
			t.Errorf("exit code %d (want 2), and no Elastic IP reserved or released:\n%s", res.ExitCode(), run.text)
		}
	})

	t.Run("an orphan is listed", func(t *testing.T) {
		ctx := context.Background()
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := h.kube.CoreV1().Services("default").Patch(ctx, "api", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := h.kube.CoreV1().Services("default").Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		run := runPlan(t, h.env, h.emu, h.settings)
		if len(run.res.Orphans) != 1 || !strings.Contains(run.text, run.res.Orphans[0].Address) {
			t.Errorf("%d orphans, want 1 (api's):\n%s", len(run.res.Orphans), run.text)
		}
		if countEIPs(run.res, plan.ActionRelease) != 0 {
			t.Errorf("an orphan is planned for release with orphanEIPs=report:\n%s", run.text)
		}
	})
}

// TestPlanAfterUpstream: the migration guide's first step. Against what
// upstream v3.8.1 left (both MetalLB modes), before this CCM ever ran, plan
// reserves and releases nothing.
func TestPlanAfterUpstream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dir, lb string }{
		{"testdata/upstream-v3.8.1/crd", "metallb:///metallb-system?crdConfiguration=true"},
		{"testdata/upstream-v3.8.1/configmap", "metallb:///metallb-system/config"},
	} {
		t.Run(filepath.Base(tc.dir), func(t *testing.T) {
			_, env, emu := loadUpstream(t, tc.dir, nil)
			settings := map[string]any{
				"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": emu.URL(),
				"loadbalancer": tc.lb, "moduleCacheDir": t.TempDir(),
			}
			run := runPlan(t, env, emu, settings)
			for _, e := range run.res.EIPs {
				if e.Action != plan.ActionWait {
					t.Errorf("Elastic IP change after upstream: %+v", e)
				}
			}
			if len(run.res.Orphans) != 0 || len(run.res.Placement) != 0 || len(run.res.BGPSessions) != 0 || run.res.ProjectBGP != "" {
				t.Errorf("orphans, placement moves or BGP set-up after upstream:\n%s", run.text)
			}
			t.Logf("plan after upstream (%s):\n%s", tc.lb, run.text)
		})
	}
}

// waitConverged waits until services Services have their address, pools
// pools exist, and nodes nodes have their BGP annotations, with the
// module's last sync a success.
func waitConverged(h *harness, services, pools, nodes int) {
	h.t.Helper()
	h.eventually("the cluster converges", func() (bool, string) {
		ctx := context.Background()
		sl, err := h.kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		with := 0
		for _, s := range sl.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				with++
			}
		}
		nl, err := h.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		annotated := 0
		for _, n := range nl.Items {
			if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "" {
				annotated++
			}
		}
		havePools, err := dynamicPools(h.env)
		if err != nil {
			return false, err.Error()
		}
		rec := h.cloud.reconciler.Load()
		synced := rec != nil && rec.LastError() == nil
		msg := fmt.Sprintf("%d Services with ingress, %d annotated nodes, %d pools, module synced %v", with, annotated, havePools, synced)
		return with == services && annotated == nodes && havePools == pools && synced, msg
	})
	// One more debounce period, so a sync marked dirty by the last change has run.
	time.Sleep(2 * time.Second)
}

func dynamicPools(env *testenv.Env) (int, error) {
	l, err := kubernetes.NewForConfigOrDie(env.Config).RESTClient().Get().
		AbsPath("/apis/metallb.io/v1beta1/namespaces/metallb-system/ipaddresspools").DoRaw(context.Background())
	if err != nil {
		return 0, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(l, &list); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// movedPolicies is a policy directory like the built-ins, except that
// Elastic IPs go to metro sv and only node-0 gets BGP.
func movedPolicies(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := fs.ReadDir(policies.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".rego") || strings.HasSuffix(e.Name(), "_test.rego") {
			continue
		}
		b, err := fs.ReadFile(policies.FS, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	eipPolicy := "package equinix.eip\n\nplacement := {\"metro\": \"sv\"}\n\ndeny contains msg if {\n\tfalse\n\tmsg := \"\"\n}\n"
	bgpPolicy := "package equinix.bgp\n\nselected_nodes contains name if {\n\tsome node in input.nodes\n\tname := node.name\n\tname == \"node-0\"\n}\n"
	for name, body := range map[string]string{"eip.rego": eipPolicy, "bgp.rego": bgpPolicy} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func cloneSettings(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
