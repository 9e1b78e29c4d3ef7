package provider

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/upstreamfixture"
)

// The take-over tests start from what the real upstream CCM v3.8.1 left
// behind (testdata/upstream-v3.8.1, captured on this project's emulator
// and a real kube-apiserver), loaded as it is, then start this CCM.

var bgpAdvertisements = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"}

const metallbNS = "metallb-system"

// takeover is a cluster and a project in the state upstream left, and this
// CCM started on them.
type takeover struct {
	*harness
	fx     *upstreamfixture.Fixture
	dyn    dynamic.Interface
	before map[string]string            // Service name -> ingress IP, as upstream left it
	eips   map[string]string            // Service name -> reservation ID, as upstream left it
	notes  map[string]map[string]string // node -> upstream's metal.equinix.com/ annotations
}

func startTakeover(t *testing.T, dir, loadbalancer string) *takeover {
	t.Helper()
	return startTakeoverWith(t, dir, loadbalancer, nil)
}

// startTakeoverWith lets edit change the fixture before it is loaded.
func startTakeoverWith(t *testing.T, dir, loadbalancer string, edit func(*upstreamfixture.Fixture)) *takeover {
	t.Helper()
	fx, env, emu := loadUpstream(t, dir, edit)
	to := newTakeover(t, fx, env, emu)
	to.harness = newHarness(t, harnessOptions{env: env, emu: emu, settings: map[string]any{"loadbalancer": loadbalancer}})
	return to
}

// newTakeover records what upstream left (addresses, reservations, node
// annotations) and zeroes the emulator's counts; its harness, the CCM, is
// the caller's to start.
func newTakeover(t *testing.T, fx *upstreamfixture.Fixture, env *testenv.Env, emu *emulator.Emulator) *takeover {
	t.Helper()
	to := &takeover{fx: fx, dyn: dynamic.NewForConfigOrDie(env.Config), before: map[string]string{}, eips: map[string]string{}, notes: map[string]map[string]string{}}
	for _, o := range fx.Objects {
		if o.GetKind() == "Node" {
			to.notes[o.GetName()] = metalAnnotations(o.GetAnnotations())
		}
		if o.GetKind() != "Service" {
			continue
		}
		ing, _, _ := unstructured.NestedSlice(o.Object, "status", "loadBalancer", "ingress")
		to.before[o.GetName()] = ing[0].(map[string]any)["ip"].(string)
		for _, r := range fx.ElasticIPs() {
			if r.HasTags(eip.Tags(fx.ClusterUID, o.GetNamespace(), o.GetName())...) {
				to.eips[o.GetName()] = r.ID
			}
		}
	}
	if len(to.before) == 0 || len(to.eips) != len(to.before) {
		t.Fatalf("fixture: %d Services, %d of them with a reservation carrying their tags", len(to.before), len(to.eips))
	}
	emu.ResetCounts()
	return to
}

// loadUpstream loads what upstream left in dir into a new apiserver and
// emulator; edit may change the fixture first. No CCM runs.
func loadUpstream(t *testing.T, dir string, edit func(*upstreamfixture.Fixture)) (*upstreamfixture.Fixture, *testenv.Env, *emulator.Emulator) {
	t.Helper()
	fx, err := upstreamfixture.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(fx)
	}
	env := testenv.New(t, testenv.Options{AuditLog: true, Users: testUsers})
	admin := &harness{t: t, env: env}
	admin.kube = kubernetes.NewForConfigOrDie(env.Config)
	seed, err := fx.Seed(admin.clusterID())
	if err != nil {
		t.Fatal(err)
	}
	emu := emulator.StartForTest(t, seed, emulator.Options{})
	if err := fx.Apply(context.Background(), env.Config); err != nil {
		t.Fatal(err)
	}
	return fx, env, emu
}

// withMultiHop is upstream's annotations of a node and the one this CCM
// adds beside each peer IP (upstream wrote none): the peer's multihop, as
// Equinix's neighbour data says it; the fixture's neighbours all say true.
func withMultiHop(upstream map[string]string) map[string]string {
	out := maps.Clone(upstream)
	for k := range upstream {
		if pre, ok := strings.CutSuffix(k, "-peer-ip"); ok && strings.HasPrefix(k, "metal.equinix.com/bgp-peers-") {
			out[pre+"-peer-multi-hop"] = "true"
		}
	}
	return out
}

func metalAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if strings.HasPrefix(k, "metal.equinix.com/") {
			out[k] = v
		}
	}
	return out
}

// checkKept: every Service keeps its IP, every node upstream's BGP
// annotations, and Equinix saw no reservation requested or released.
func (to *takeover) checkKept(except ...string) {
	to.t.Helper()
	for name, want := range to.notes {
		n, err := to.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			to.t.Fatal(err)
		}
		if got := metalAnnotations(n.Annotations); !reflect.DeepEqual(got, withMultiHop(want)) {
			to.t.Errorf("node %s annotations %v, want what upstream left (%v) and a peer-multi-hop beside each peer-ip", name, got, want)
		}
	}
	for name, ip := range to.before {
		if slices.Contains(except, name) {
			continue
		}
		got, msg := to.serviceIP(name)
		if got != ip {
			to.t.Errorf("Service %s: ingress %q, want upstream's %s (%s)", name, got, ip, msg)
		}
		if _, ok := to.emu.Reservation(to.eips[name]); !ok {
			to.t.Errorf("Service %s: its reservation %s is gone", name, to.eips[name])
		}
	}
}

func (to *takeover) requests() (reserved, released int64) {
	return to.emu.Count(emulator.RouteRequestIPReservation), to.emu.Count(emulator.RouteDeleteIP)
}

func (to *takeover) list(gvr schema.GroupVersionResource) []unstructured.Unstructured {
	to.t.Helper()
	l, err := to.dyn.Resource(gvr).Namespace(metallbNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		to.t.Fatal(err)
	}
	return l.Items
}

// crdState summarises the MetalLB objects: pool name -> addresses, and the
// pools the advertisements list (an advertisement without pools or
// selectors announces every pool, as MetalLB reads it).
func (to *takeover) crdState() (pools map[string][]string, advertised map[string]bool, owned map[string]bool) {
	pools, advertised, owned = map[string][]string{}, map[string]bool{}, map[string]bool{}
	for _, p := range to.list(ipAddressPools) {
		addrs, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "addresses")
		pools[p.GetName()] = addrs
		owned[p.GetName()] = p.GetLabels()[sdk.OwnedLabel] == sdk.OwnedValue
	}
	for _, a := range to.list(bgpAdvertisements) {
		names, _, _ := unstructured.NestedStringSlice(a.Object, "spec", "ipAddressPools")
		sel, _, _ := unstructured.NestedSlice(a.Object, "spec", "ipAddressPoolSelectors")
		if len(names) == 0 && len(sel) == 0 {
			for p := range pools {
				advertised[p] = true
			}
		}
		for _, n := range names {
			advertised[n] = true
		}
	}
	return pools, advertised, owned
}

// unadvertised lists the pools no advertisement covers, and the pools with
// an address that is not a /32 (upstream's empty-string rewrite).
func unadvertised(pools map[string][]string, advertised map[string]bool) []string {
	var bad []string
	for p, addrs := range pools {
		if !advertised[p] {
			bad = append(bad, p+" (not advertised)")
		}
		for _, a := range addrs {
			if !strings.HasSuffix(a, "/32") {
				bad = append(bad, fmt.Sprintf("%s (address %q)", p, a))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// TestTakeOverFromUpstreamCRD: upstream v3.8.1 in MetalLB CRD mode left 5
// Services, their pools, peers and advertisement. This CCM takes over
// without touching Equinix, adopts the advertisement, announces a new
// Service, and deleting one Service releases exactly its reservation and
// pool. The pools keep upstream's labels, so upstream can take them back.
func TestTakeOverFromUpstreamCRD(t *testing.T) {
	t.Parallel()
	to := startTakeover(t, "testdata/upstream-v3.8.1/crd", "metallb:///metallb-system?crdConfiguration=true")
	ctx := context.Background()

	to.eventually("the upstream pools and advertisement adopted", func() (bool, string) {
		pools, adv, owned := to.crdState()
		for name := range to.before {
			p := "default." + name
			if !owned[p] {
				return false, fmt.Sprintf("pool %s not owned yet; pools %v", p, pools)
			}
		}
		if bad := unadvertised(pools, adv); len(bad) > 0 {
			return false, fmt.Sprintf("pools %v", bad)
		}
		return len(pools) == len(to.before), fmt.Sprintf("%d pools", len(pools))
	})
	to.checkKept()
	if res, rel := to.requests(); res != 0 || rel != 0 {
		t.Fatalf("taking over: %d reservations requested, %d released; want 0 and 0", res, rel)
	}
	// Every Elastic IP is reserved in metro da: its pool is announced by
	// the advertisement restricted to da's nodes alone, and the adopted
	// equinix-metal-bgp-adv lists no pool any more (its list, upstream's
	// field manager's, taken over by the apply).
	to.eventually("the pools advertised from metro da's nodes only", func() (bool, string) {
		got := map[string]string{}
		for _, a := range to.list(bgpAdvertisements) {
			names, _, _ := unstructured.NestedStringSlice(a.Object, "spec", "ipAddressPools")
			sel, _, _ := unstructured.NestedSlice(a.Object, "spec", "nodeSelectors")
			got[a.GetName()] = fmt.Sprintf("%d pools, %d node selectors", len(names), len(sel))
		}
		want := map[string]string{
			"equinix-metal-bgp-adv":          "0 pools, 0 node selectors",
			"equinix-metal-bgp-adv-metro-da": fmt.Sprintf("%d pools, 1 node selectors", len(to.before)),
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("advertisements %v", got)
	})
	for _, p := range to.list(ipAddressPools) {
		svc := strings.TrimPrefix(p.GetName(), "default.")
		if got := p.GetLabels()["service-"+svc]; got != "namespace-default" || p.GetLabels()["cloud-provider"] != "equinix-metal" {
			t.Errorf("pool %s labels %v: upstream would not read it as its own", p.GetName(), p.GetLabels())
		}
	}
	// The peers are applied after the pools, in the same sync: each of
	// upstream's first fails on its v1beta1 ownership, which is dropped,
	// and is applied again.
	var peers []unstructured.Unstructured
	to.eventually("upstream's 8 peers (4 nodes x 2 peers) adopted", func() (bool, string) {
		peers = to.list(bgpPeers)
		var not []string
		for _, p := range peers {
			if p.GetLabels()[sdk.OwnedLabel] != sdk.OwnedValue {
				not = append(not, p.GetName())
			}
		}
		return len(peers) == 8 && len(not) == 0, fmt.Sprintf("%d peers, not adopted: %v", len(peers), not)
	})
	to.checkOwnershipReset(peers)

	// A Service created after the switch is announced.
	to.addService("svc-new", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	var newIP string
	to.eventually("the new Service's pool is advertised", func() (bool, string) {
		var msg string
		if newIP, msg = to.serviceIP("svc-new"); newIP == "" {
			return false, msg
		}
		pools, adv, _ := to.crdState()
		if !slices.Equal(pools["default.svc-new"], []string{newIP + "/32"}) || !adv["default.svc-new"] {
			return false, fmt.Sprintf("pool %v advertised %v", pools["default.svc-new"], adv["default.svc-new"])
		}
		return len(unadvertised(pools, adv)) == 0, fmt.Sprint(unadvertised(pools, adv))
	})
	if res, rel := to.requests(); res != 1 || rel != 0 {
		t.Fatalf("after one new Service: %d reservations requested, %d released; want 1 and 0", res, rel)
	}

	// Deleting one of upstream's Services releases exactly its reservation and pool.
	if err := to.kube.CoreV1().Services("default").Delete(ctx, "svc-002", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	to.eventually("svc-002's reservation released and pool pruned", func() (bool, string) {
		_, held := to.emu.Reservation(to.eips["svc-002"])
		pools, adv, _ := to.crdState()
		_, pool := pools["default.svc-002"]
		return !held && !pool && !adv["default.svc-002"], fmt.Sprintf("reservation held %v, pool %v, advertised %v", held, pool, adv["default.svc-002"])
	})
	to.checkKept("svc-002")
	pools, adv, _ := to.crdState()
	if len(pools) != len(to.before) || len(unadvertised(pools, adv)) != 0 {
		t.Errorf("pools after the deletion: %v, advertised %v", pools, adv)
	}
	if res, rel := to.requests(); res != 1 || rel != 1 {
		t.Fatalf("after deleting one Service: %d reservations requested, %d released; want 1 and 1", res, rel)
	}
	if _, ok := to.emu.Reservation(to.eips["svc-002"]); ok {
		t.Fatal("svc-002's reservation is still there")
	}
	to.checkRBAC()
}

// checkOwnershipReset: upstream wrote its BGPPeers at v1beta1, which the
// apiserver cannot convert them back to once v1beta2 defaulted fields
// v1beta1 lacks (MetalLB's CRDs without the conversion webhook). The CCM
// dropped that stale ownership (the apply failed on it before), kept none
// at v1beta1, and said so on each peer in one Event naming upstream's
// manager.
func (to *takeover) checkOwnershipReset(peers []unstructured.Unstructured) {
	to.t.Helper()
	for _, p := range peers {
		for _, mf := range p.GetManagedFields() {
			if mf.APIVersion != bgpPeers.GroupVersion().String() {
				to.t.Errorf("peer %s keeps managed fields of %s at %s", p.GetName(), mf.Manager, mf.APIVersion)
			}
		}
		to.eventually("an Event on peer "+p.GetName()+" naming upstream's v1beta1 writes", func() (bool, string) {
			list, err := to.kube.CoreV1().Events(metallbNS).List(context.Background(), metav1.ListOptions{
				FieldSelector: "involvedObject.kind=BGPPeer,involvedObject.name=" + p.GetName() + ",reason=FieldOwnershipReset"})
			if err != nil {
				return false, err.Error()
			}
			var msgs []string
			for _, e := range list.Items {
				msgs = append(msgs, e.Message)
			}
			return len(msgs) == 1 && strings.Contains(msgs[0], upstreamfixture.UpstreamManager+" (Update, metallb.io/v1beta1)"), fmt.Sprint(msgs)
		})
	}
}

var bgpPeers = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}

// legacyConfig is the MetalLB ConfigMap's data.config, parsed.
type legacyConfig struct {
	Pools []map[string]any `json:"address-pools"`
	Peers []map[string]any `json:"peers"`
}

func (to *takeover) legacy() (legacyConfig, string) {
	to.t.Helper()
	cm, err := to.kube.CoreV1().ConfigMaps(metallbNS).Get(context.Background(), "config", metav1.GetOptions{})
	if err != nil {
		to.t.Fatal(err)
	}
	var c legacyConfig
	if err := yaml.Unmarshal([]byte(cm.Data["config"]), &c); err != nil {
		to.t.Fatal(err)
	}
	return c, cm.Data["config"]
}

func (c legacyConfig) pool(name string) map[string]any {
	for _, p := range c.Pools {
		if p["name"] == name {
			return p
		}
	}
	return nil
}

// withoutAutoAssign rewrites the captured ConfigMap's user-pool as MetalLB
// documents it, without auto-assign (upstream v3.8.1 crashes on it; the
// capture spells it out for that reason).
func withoutAutoAssign(t *testing.T, fx *upstreamfixture.Fixture) {
	for _, o := range fx.Objects {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		cfg, _, _ := unstructured.NestedString(o.Object, "data", "config")
		var c map[string]any
		if err := yaml.Unmarshal([]byte(cfg), &c); err != nil {
			t.Fatal(err)
		}
		for _, p := range c["address-pools"].([]any) {
			if pm := p.(map[string]any); pm["name"] == "user-pool" {
				delete(pm, "auto-assign")
			}
		}
		b, _ := yaml.Marshal(c)
		if err := unstructured.SetNestedField(o.Object, string(b), "data", "config"); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("the fixture has no ConfigMap")
}

// TestTakeOverFromUpstreamConfigMap: upstream v3.8.1 in legacy ConfigMap
// mode left 5 Services, their pools and peers in metallb-system/config
// next to the user's own pool. This CCM takes over without touching
// Equinix; the user's pool stays as it is (also when it omits auto-assign,
// which crashes upstream); a new Service gets a pool and deleting one
// Service releases exactly its reservation and pool.
func TestTakeOverFromUpstreamConfigMap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		noAutoAssign bool
	}{{"as captured", false}, {"user pool without auto-assign", true}} {
		t.Run(tc.name, func(t *testing.T) {
			testTakeOverConfigMap(t, tc.noAutoAssign)
		})
	}
}

func testTakeOverConfigMap(t *testing.T, noAutoAssign bool) {
	var edit func(*upstreamfixture.Fixture)
	if noAutoAssign {
		edit = func(fx *upstreamfixture.Fixture) { withoutAutoAssign(t, fx) }
	}
	to := startTakeoverWith(t, "testdata/upstream-v3.8.1/configmap", "metallb:///metallb-system/config", edit)
	ctx := context.Background()
	c0, _ := to.legacy()
	userPool := c0.pool("user-pool")
	if userPool == nil {
		t.Fatal("the fixture's ConfigMap has no user-pool")
	}
	if _, has := userPool["auto-assign"]; has == noAutoAssign {
		t.Fatalf("user-pool as loaded: %v", userPool)
	}

	// The take-over is done when the CCM's peers replaced upstream's: same
	// sessions, and ownership is visible in the ConfigMap's managed fields.
	to.eventually("the ConfigMap taken over", func() (bool, string) {
		cm, err := to.kube.CoreV1().ConfigMaps(metallbNS).Get(ctx, "config", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		applied := false
		for _, mf := range cm.ManagedFields {
			applied = applied || (mf.Manager == "cloud-provider-equinix-metal" && mf.Operation == metav1.ManagedFieldsOperationApply)
		}
		return applied, fmt.Sprintf("managers %v", cm.ManagedFields)
	})
	c1, raw := to.legacy()
	if !reflect.DeepEqual(c1.pool("user-pool"), userPool) {
		t.Errorf("user-pool changed: %v, was %v", c1.pool("user-pool"), userPool)
	}
	for name, ip := range to.before {
		p := c1.pool("default/" + name)
		if p == nil || fmt.Sprint(p["addresses"]) != fmt.Sprint([]any{ip + "/32"}) {
			t.Errorf("pool default/%s = %v, want %s/32", name, p, ip)
		}
	}
	if len(c1.Pools) != len(to.before)+1 || len(c1.Peers) != 8 {
		t.Errorf("%d pools and %d peers, want %d and 8:\n%s", len(c1.Pools), len(c1.Peers), len(to.before)+1, raw)
	}
	checkUpstreamPeers(t, c1.Peers)
	to.checkKept()
	if res, rel := to.requests(); res != 0 || rel != 0 {
		t.Fatalf("taking over: %d reservations requested, %d released; want 0 and 0", res, rel)
	}

	to.addService("svc-new", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	to.eventually("the new Service has a pool", func() (bool, string) {
		ip, msg := to.serviceIP("svc-new")
		if ip == "" {
			return false, msg
		}
		c, raw := to.legacy()
		p := c.pool("default/svc-new")
		return p != nil && fmt.Sprint(p["addresses"]) == fmt.Sprint([]any{ip + "/32"}), raw
	})
	if res, rel := to.requests(); res != 1 || rel != 0 {
		t.Fatalf("after one new Service: %d reservations requested, %d released; want 1 and 0", res, rel)
	}

	if err := to.kube.CoreV1().Services("default").Delete(ctx, "svc-002", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	to.eventually("svc-002's reservation released and pool removed", func() (bool, string) {
		_, held := to.emu.Reservation(to.eips["svc-002"])
		c, raw := to.legacy()
		return !held && c.pool("default/svc-002") == nil, fmt.Sprintf("reservation held %v; config:\n%s", held, raw)
	})
	to.checkKept("svc-002")
	c2, raw := to.legacy()
	if !reflect.DeepEqual(c2.pool("user-pool"), userPool) || len(c2.Pools) != len(to.before)+1 {
		t.Errorf("after the deletion:\n%s", raw)
	}
	if res, rel := to.requests(); res != 1 || rel != 1 {
		t.Fatalf("after deleting one Service: %d reservations requested, %d released; want 1 and 1", res, rel)
	}
	to.checkRBACOf("overlays/metallb-legacy")
}

// checkUpstreamPeers: for a rollback, every peer is in a form upstream
// v3.8.1 finds again (its EqualIgnoreService skips a selector with at
// most two labels of which its service-name or service-namespace is set):
// the node's hostname selector, the CCM's one constant marker in
// upstream's service-name label, and no peer-port (upstream compares the
// port and writes none). No selector per Service: MetalLB <= 0.12 resets
// a peer's session whenever its entry changes.
func checkUpstreamPeers(t *testing.T, peers []map[string]any) {
	t.Helper()
	for _, p := range peers {
		if _, has := p["peer-port"]; has {
			t.Errorf("peer %v has a peer-port; upstream would add a second copy", p)
		}
		sels, _ := p["node-selectors"].([]any)
		hostname, marker := 0, 0
		for _, s := range sels {
			ml, _ := s.(map[string]any)["match-labels"].(map[string]any)
			if ml["kubernetes.io/hostname"] != nil {
				hostname++
			}
			if len(ml) == 1 && ml["nomatch.metal.equinix.com/service-name"] == "cloud-provider-equinix-metal" {
				marker++
			}
		}
		if hostname != 1 || marker != 1 || len(sels) != 2 {
			t.Errorf("peer %v node-selectors %v: want the hostname's and the CCM's marker only", p["peer-address"], sels)
		}
	}
}
