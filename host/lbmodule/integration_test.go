package lbmodule_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metallbv1beta2 "go.universe.tf/metallb/api/v1beta2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

var (
	poolsGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}
	peersGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}
	advsGVR  = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"}
	cmGVR    = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// cluster is one real kube-apiserver with MetalLB's CRDs, three nodes and
// the namespaces the modules write to.
type cluster struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	cfg  *rest.Config
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(t, testenv.Options{})
}

// startClusterWith starts the cluster with opts (for example another
// MetalLB version's CRDs).
func startClusterWith(t *testing.T, opts testenv.Options) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test against a real kube-apiserver; run without -short")
	}
	env := testenv.New(t, opts)
	c := &cluster{kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config), cfg: env.Config}
	ctx := context.Background()
	for _, ns := range []string{"metallb-system", "hostile", "ai", "shop"} {
		_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) { // testenv may create metallb-system
			t.Fatal(err)
		}
	}
	for _, n := range []string{"worker-1", "worker-2", "worker-3"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}
		if _, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// snapshot is a mutable stand-in for the core's view of the cluster.
type snapshot struct {
	mu  sync.Mutex
	req sdk.GenerateRequest
	err error
}

func (s *snapshot) get(context.Context) (sdk.GenerateRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.req, s.err
}

// setErr makes the snapshot fail (nil: succeed again).
func (s *snapshot) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *snapshot) set(req sdk.GenerateRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.req = req
}

func threeByThree() sdk.GenerateRequest {
	var req sdk.GenerateRequest
	for i, name := range []string{"web", "api", "db"} {
		req.Services = append(req.Services, sdk.Service{Namespace: "shop", Name: name, UID: "uid-" + name,
			IPs: []string{fmt.Sprintf("145.40.1.%d", 10+i)}, Ports: []sdk.Port{{Protocol: "TCP", Port: 443}}})
	}
	for i, name := range []string{"worker-1", "worker-2", "worker-3"} {
		req.Nodes = append(req.Nodes, sdk.Node{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name},
			LocalASN: 65000, SourceIP: fmt.Sprintf("10.66.0.%d", i+1),
			Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1", Password: fakePassword}, {ASN: 65530, IP: "169.254.255.2", Password: fakePassword}}})
	}
	req.Annotations = sdk.AnnotationTemplates{LocalASN: "metal.equinix.com/bgp-peers-{{n}}-node-asn", PeerASN: "metal.equinix.com/bgp-peers-{{n}}-peer-asn",
		PeerIP: "metal.equinix.com/bgp-peers-{{n}}-peer-ip", SrcIP: "metal.equinix.com/bgp-peers-{{n}}-src-ip", BGPPass: "metal.equinix.com/bgp-peers-{{n}}-bgp-pass"}
	return req
}

// hostile is the runtime's test module (one misbehaviour per mode), built
// from the SDK module's testdata: here it shows that no misbehaviour reaches
// the cluster.
func hostile(t testing.TB) []byte { return sdktest.Build(t, "../../sdk/wasmhost/testdata/hostile") }

// loopOpts has a short deadline, for the module that never returns.
func loopOpts() wasmhost.Options {
	o := opts()
	o.Timeout = time.Second
	return o
}

func reconciler(t *testing.T, c *cluster, wasm []byte, options sdk.Options, snap *snapshot, rec lbmodule.EventRecorder) *lbmodule.Reconciler {
	t.Helper()
	o := opts()
	if options.Params["mode"] == "loop" {
		o = loopOpts()
	}
	m, err := wasmhost.LoadBytes(context.Background(), "under-test", wasm, options, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	r, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{Module: m, Dynamic: c.dyn, Metadata: metadata.NewForConfigOrDie(c.cfg), Kube: c.kube, Snapshot: snap.get, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func names(t *testing.T, c *cluster, gvr schema.GroupVersionResource, ns string) []string {
	t.Helper()
	l, err := c.dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range l.Items {
		out = append(out, u.GetName())
	}
	return out
}

func get(t *testing.T, c *cluster, gvr schema.GroupVersionResource, ns, name string, into any) *unstructured.Unstructured {
	t.Helper()
	u, err := c.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if into != nil {
		b, _ := json.Marshal(u.Object)
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// watchOrder watches gvr's objects in ns from now on, in the order the API
// server committed their changes (the order every informer sees them).
// The function it returns waits for n events (at most ten seconds), stops
// the watch and returns them as "<TYPE> <name>".
func watchOrder(t *testing.T, c *cluster, gvr schema.GroupVersionResource, ns string) func(n int) []string {
	t.Helper()
	ctx := context.Background()
	l, err := c.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.dyn.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	return func(n int) []string {
		defer w.Stop()
		var got []string
		timeout := time.After(10 * time.Second)
		for len(got) < n {
			select {
			case e := <-w.ResultChan():
				if u, ok := e.Object.(*unstructured.Unstructured); ok {
					got = append(got, string(e.Type)+" "+u.GetName())
				}
			case <-timeout:
				return got
			}
		}
		return got
	}
}

// sortedPrefix is events with its first n sorted: writes of one wave go
// out together, in any order.
func sortedPrefix(events []string, n int) []string {
	out := slices.Clone(events)
	if len(out) >= n {
		slices.Sort(out[:n])
	}
	return out
}

func TestIntegration(t *testing.T) {
	// Pages of two, so that every list the reconciler makes here (owned
	// objects, nodes, prunes) takes several pages.
	t.Cleanup(lbmodule.SetListPageSize(2))
	c := startCluster(t)
	ctx := context.Background()

	t.Run("metallb CRDs", func(t *testing.T) {
		snap := &snapshot{}
		snap.set(threeByThree())
		r := reconciler(t, c, sdktest.Build(t, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, snap, nil)
		// A pool of the user's own, which the CCM must never touch.
		userPool := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
			"metadata": map[string]any{"name": "user-pool", "namespace": "metallb-system"},
			"spec":     map[string]any{"addresses": []any{"198.51.100.0/24"}}}}
		if _, err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").Create(ctx, userPool, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}

		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(names(t, c, poolsGVR, "metallb-system"), " "); got != "shop.api shop.db shop.web user-pool" {
			t.Fatalf("pools: %s", got)
		}
		if got := len(names(t, c, peersGVR, "metallb-system")); got != 6 {
			t.Fatalf("%d BGPPeers, want 3 nodes × 2 peers", got)
		}
		var pool metallbv1beta1.IPAddressPool
		u := get(t, c, poolsGVR, "metallb-system", "shop.web", &pool)
		if pool.Spec.AutoAssign == nil || *pool.Spec.AutoAssign || pool.Spec.Addresses[0] != "145.40.1.10/32" || u.GetLabels()[sdk.OwnedLabel] != sdk.OwnedValue {
			t.Errorf("pool shop.web = %+v labels %v", pool.Spec, u.GetLabels())
		}
		var peer metallbv1beta2.BGPPeer
		get(t, c, peersGVR, "metallb-system", "worker-3-1", &peer)
		if peer.Spec.Address != "169.254.255.2" || peer.Spec.SrcAddress != "10.66.0.3" || peer.Spec.MyASN != 65000 || peer.Spec.Password != "" ||
			peer.Spec.PasswordSecret.Name != "equinix-metal-bgp-password" || peer.Spec.PasswordSecret.Namespace != "metallb-system" ||
			peer.Spec.NodeSelectors[0].MatchLabels["kubernetes.io/hostname"] != "worker-3" {
			t.Errorf("peer worker-3-1 = %+v", peer.Spec)
		}
		// The password lives in the Secret the peers reference, as MetalLB
		// wants it, and is owned (pruned) like the module's other objects.
		sec, err := c.kube.CoreV1().Secrets("metallb-system").Get(ctx, "equinix-metal-bgp-password", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sec.Type != corev1.SecretTypeBasicAuth || string(sec.Data["password"]) != fakePassword || sec.Labels[sdk.OwnedLabel] != sdk.OwnedValue {
			t.Errorf("secret: type %q, %d data keys, labels %v; want basic-auth with the password, owned", sec.Type, len(sec.Data), sec.Labels)
		}
		var adv metallbv1beta1.BGPAdvertisement
		get(t, c, advsGVR, "metallb-system", "equinix-metal-bgp-adv", &adv)
		if strings.Join(adv.Spec.IPAddressPools, " ") != "shop.api shop.db shop.web" {
			t.Errorf("advertisement pools %v", adv.Spec.IPAddressPools)
		}
		peerRV := get(t, c, peersGVR, "metallb-system", "worker-1-0", nil).GetResourceVersion()

		t.Run("deleting a Service prunes its pool and nothing else", func(t *testing.T) {
			req := threeByThree()
			req.Services = req.Services[1:] // web is gone
			snap.set(req)
			if err := r.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(t, c, poolsGVR, "metallb-system"), " "); got != "shop.api shop.db user-pool" {
				t.Fatalf("pools: %s", got)
			}
			if rv := get(t, c, peersGVR, "metallb-system", "worker-1-0", nil).GetResourceVersion(); rv != peerRV {
				t.Errorf("an unchanged BGPPeer was rewritten (resourceVersion %s -> %s)", peerRV, rv)
			}
			get(t, c, advsGVR, "metallb-system", "equinix-metal-bgp-adv", &adv)
			if strings.Join(adv.Spec.IPAddressPools, " ") != "shop.api shop.db" {
				t.Errorf("advertisement pools %v", adv.Spec.IPAddressPools)
			}
		})

		t.Run("located pools are advertised from their metro's nodes only", func(t *testing.T) {
			located := func() sdk.GenerateRequest {
				req := threeByThree()
				req.Services = req.Services[1:]
				for i, metro := range []string{"sv", "da"} {
					s := &req.Services[i]
					s.Locations = []sdk.AddressLocation{{IP: s.IPs[0], Metro: metro}}
				}
				return req
			}
			// The default advertisement as upstream left it (not owned),
			// as at a take-over: the pools move from it to the per-metro
			// ones.
			if _, err := c.dyn.Resource(advsGVR).Namespace("metallb-system").Patch(ctx, "equinix-metal-bgp-adv", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+sdk.OwnedLabel+`":null}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			events := watchOrder(t, c, advsGVR, "metallb-system")
			snap.set(located())
			if err := r.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(t, c, advsGVR, "metallb-system"), " "); got != "equinix-metal-bgp-adv equinix-metal-bgp-adv-metro-da equinix-metal-bgp-adv-metro-sv" {
				t.Fatalf("advertisements: %s", got)
			}
			// Make before break: MetalLB's speaker acts on each event, and
			// had it seen the default's change first, it would have
			// withdrawn both pools until the per-metro ones came.
			want := []string{"ADDED equinix-metal-bgp-adv-metro-da", "ADDED equinix-metal-bgp-adv-metro-sv", "MODIFIED equinix-metal-bgp-adv"}
			if got := events(len(want)); !slices.Equal(sortedPrefix(got, 2), want) {
				t.Errorf("the API server took the advertisements' changes in the order %q, want the new ones first: %q", got, want)
			}
			// The default one lists no pool (the API server's apply
			// removed the list the CCM owned) and selects none.
			var def metallbv1beta1.BGPAdvertisement
			get(t, c, advsGVR, "metallb-system", "equinix-metal-bgp-adv", &def)
			if len(def.Spec.IPAddressPools) != 0 || len(def.Spec.IPAddressPoolSelectors) != 1 || def.Spec.IPAddressPoolSelectors[0].MatchLabels["lb.metal.equinix.com/no-pool"] != "none" {
				t.Errorf("default advertisement %+v", def.Spec)
			}
			var sv metallbv1beta1.BGPAdvertisement
			get(t, c, advsGVR, "metallb-system", "equinix-metal-bgp-adv-metro-sv", &sv)
			if strings.Join(sv.Spec.IPAddressPools, " ") != "shop.api" || len(sv.Spec.NodeSelectors) != 1 || sv.Spec.NodeSelectors[0].MatchLabels["topology.kubernetes.io/region"] != "sv" {
				t.Errorf("metro sv's advertisement %+v", sv.Spec)
			}
			// Locations gone (a module of an older ABI would not get
			// them): the default lists every pool again, the per-metro
			// ones are pruned.
			req := threeByThree()
			req.Services = req.Services[1:]
			snap.set(req)
			if err := r.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(t, c, advsGVR, "metallb-system"), " "); got != "equinix-metal-bgp-adv" {
				t.Fatalf("advertisements: %s", got)
			}
			def = metallbv1beta1.BGPAdvertisement{}
			get(t, c, advsGVR, "metallb-system", "equinix-metal-bgp-adv", &def)
			if strings.Join(def.Spec.IPAddressPools, " ") != "shop.api shop.db" || len(def.Spec.IPAddressPoolSelectors) != 0 {
				t.Errorf("default advertisement %+v", def.Spec)
			}
		})

		t.Run("a user-labelled BGPAdvertisement suppresses the default", func(t *testing.T) {
			mine := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
				"metadata": map[string]any{"name": "mine", "namespace": "metallb-system", "labels": map[string]any{"cloud-provider": "equinix-metal"}},
				"spec":     map[string]any{"communities": []any{"65535:65282"}}}}
			if _, err := c.dyn.Resource(advsGVR).Namespace("metallb-system").Create(ctx, mine, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := r.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(t, c, advsGVR, "metallb-system"), " "); got != "mine" {
				t.Fatalf("advertisements: %s, want only the user's", got)
			}
		})

		t.Run("a failing module changes nothing and tells the cluster once per cause", func(t *testing.T) {
			before := map[string]string{}
			for _, gvr := range []schema.GroupVersionResource{poolsGVR, peersGVR, advsGVR} {
				l, _ := c.dyn.Resource(gvr).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
				for _, u := range l.Items {
					before[gvr.Resource+"/"+u.GetName()] = u.GetResourceVersion()
				}
			}
			rec := record.NewFakeRecorder(100)
			rec.IncludeObject = true
			bad := reconciler(t, c, hostile(t), sdk.Options{Params: map[string]string{"mode": "trap"}}, snap, rec)
			// Retries of the same failure: one Event, whatever the
			// number of Services and of retries.
			for range 3 {
				err := bad.Sync(ctx)
				if err == nil || !strings.Contains(err.Error(), "trapped") {
					t.Fatalf("got %v", err)
				}
			}
			after := map[string]string{}
			for _, gvr := range []schema.GroupVersionResource{poolsGVR, peersGVR, advsGVR} {
				l, _ := c.dyn.Resource(gvr).Namespace("metallb-system").List(ctx, metav1.ListOptions{})
				for _, u := range l.Items {
					after[gvr.Resource+"/"+u.GetName()] = u.GetResourceVersion()
				}
			}
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Errorf("cluster changed:\nbefore %v\nafter  %v", before, after)
			}
			if len(rec.Events) != 1 {
				t.Fatalf("%d events after 3 failed syncs with one cause, want 1", len(rec.Events))
			}
			if e := <-rec.Events; !strings.HasPrefix(e, "Warning LoadBalancerModuleFailed load-balancer module under-test trapped") ||
				!strings.HasSuffix(e, "involvedObject{kind=Namespace,apiVersion=v1}") {
				t.Errorf("event %q, want it on a Namespace (kube-system), not on a Service", e)
			}
		})

		t.Run("a new cause is reported, and the recovery once", func(t *testing.T) {
			rec := record.NewFakeRecorder(100)
			r := reconciler(t, c, sdktest.Build(t, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, snap, rec)
			fail := errors.New("the snapshot is unavailable")
			snap.setErr(fail)
			for range 2 {
				if err := r.Sync(ctx); err == nil {
					t.Fatal("a sync without its input succeeded")
				}
			}
			snap.setErr(nil)
			for range 2 {
				if err := r.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			want := []string{"Warning LoadBalancerModuleFailed load-balancer module under-test cannot get its input: the snapshot is unavailable",
				"Normal LoadBalancerModuleRecovered The load-balancer module's output is applied again"}
			if len(rec.Events) != len(want) {
				t.Fatalf("%d events, want %d", len(rec.Events), len(want))
			}
			for _, w := range want {
				if e := <-rec.Events; !strings.HasPrefix(e, w) {
					t.Errorf("event %q, want %q", e, w)
				}
			}
		})
	})

	t.Run("a sync lists each kind once, and never after its writes", func(t *testing.T) {
		snap := &snapshot{}
		snap.set(threeByThree())
		var mu sync.Mutex
		var calls []string // "list <path>?<selector>" and "write <path>", in order
		cfg := rest.CopyConfig(c.cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				q := req.URL.Query()
				call := ""
				switch {
				case req.Method == http.MethodGet && q.Has("continue"):
					// a list's next page
				case req.Method == http.MethodGet && (q.Has("limit") || q.Has("labelSelector")):
					call = "list " + req.URL.Path + "?" + q.Get("labelSelector")
				case req.Method != http.MethodGet:
					call = "write " + req.URL.Path
				}
				if call != "" {
					mu.Lock()
					calls = append(calls, call)
					mu.Unlock()
				}
				return rt.RoundTrip(req)
			})
		})
		counted := &cluster{kube: c.kube, dyn: dynamic.NewForConfigOrDie(cfg), cfg: cfg}
		r := reconciler(t, counted, sdktest.Build(t, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, snap, nil)
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		// A Service's new address: one pool to write.
		req := threeByThree()
		req.Services[0].IPs = []string{"145.40.1.98"}
		snap.set(req)
		mu.Lock()
		calls = nil
		mu.Unlock()
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		wrote := false
		for _, call := range calls {
			if strings.HasPrefix(call, "write ") {
				wrote = true
				continue
			}
			if wrote {
				t.Errorf("%s after a write: the sync lists what it applies or prunes before the module's call (calls: %q)", call, calls)
			}
			if seen[call] {
				t.Errorf("%s twice in one sync (calls: %q)", call, calls)
			}
			seen[call] = true
		}
		if !wrote || len(seen) == 0 {
			t.Fatalf("calls %q: want lists, then the pool's write", calls)
		}
	})

	t.Run("an unchanged object is not applied again; a changed or deleted one is", func(t *testing.T) {
		snap := &snapshot{}
		snap.set(threeByThree())
		var mu sync.Mutex
		patches := map[string]int{}
		cfg := rest.CopyConfig(c.cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.Method == http.MethodPatch {
					mu.Lock()
					patches[path.Base(req.URL.Path)]++
					mu.Unlock()
				}
				return rt.RoundTrip(req)
			})
		})
		counted := &cluster{kube: c.kube, dyn: dynamic.NewForConfigOrDie(cfg), cfg: cfg}
		r := reconciler(t, counted, sdktest.Build(t, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, snap, nil)
		sync := func() map[string]int {
			t.Helper()
			mu.Lock()
			clear(patches)
			mu.Unlock()
			if err := r.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			return maps.Clone(patches)
		}
		// A new process knows nothing it applied: everything is applied once.
		if got := sync(); len(got) < 3+6 || got["shop.web"] != 1 || got["worker-3-1"] != 1 {
			t.Fatalf("first sync applied %v, want at least 3 pools and 6 peers", got)
		}
		if got := sync(); len(got) != 0 {
			t.Fatalf("a sync with nothing changed applied %v", got)
		}
		req := threeByThree()
		req.Services[0].IPs = []string{"145.40.1.99"}
		snap.set(req)
		if got := sync(); fmt.Sprint(got) != "map[shop.web:1]" {
			t.Fatalf("a changed Service applied %v, want only its pool", got)
		}
		// MetalLB's controller writes the pool's status as it allocates:
		// not a change of what the CCM owns.
		u := get(t, c, poolsGVR, "metallb-system", "shop.web", nil)
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"assignedIPv4": int64(1), "assignedIPv6": int64(0), "availableIPv4": int64(0), "availableIPv6": int64(0)}, "status")
		if _, err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := sync(); len(got) != 0 {
			t.Fatalf("after a status update by MetalLB the sync applied %v, want nothing", got)
		}
		// A pool deleted and made again by hand with another address, at
		// generation 1 as the CCM's is: another object, applied again.
		u = get(t, c, poolsGVR, "metallb-system", "shop.db", nil)
		if g := u.GetGeneration(); g != 1 {
			t.Fatalf("shop.db at generation %d, want 1 (applied once)", g)
		}
		if err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").Delete(ctx, "shop.db", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		u.SetResourceVersion("")
		u.SetUID("")
		u.SetManagedFields(nil)
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"198.51.100.8/32"}, "spec", "addresses")
		if _, err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := sync(); fmt.Sprint(got) != "map[shop.db:1]" {
			t.Fatalf("after the pool was made again by hand the sync applied %v, want it", got)
		}
		// Someone else edits one pool and deletes another: both come back.
		u = get(t, c, poolsGVR, "metallb-system", "shop.api", nil)
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"198.51.100.7/32"}, "spec", "addresses")
		if _, err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").Delete(ctx, "shop.db", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := sync(); fmt.Sprint(got) != "map[shop.api:1 shop.db:1]" {
			t.Fatalf("after an edit and a delete by hand the sync applied %v, want exactly those two", got)
		}
		var pool metallbv1beta1.IPAddressPool
		get(t, c, poolsGVR, "metallb-system", "shop.api", &pool)
		if pool.Spec.Addresses[0] != "145.40.1.11/32" {
			t.Errorf("the edited pool was not put back: %v", pool.Spec.Addresses)
		}
		get(t, c, poolsGVR, "metallb-system", "shop.db", nil)
	})

	t.Run("under Run, a sync reads and lists from its watches once they are whole", func(t *testing.T) {
		snap := &snapshot{}
		snap.set(threeByThree())
		var mu sync.Mutex
		var lists []string // the sync's own lists and reads: "<path>?<selector>"
		patches := map[string]int{}
		cfg := rest.CopyConfig(c.cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				q := req.URL.Query()
				mu.Lock()
				switch {
				case req.Method == http.MethodPatch:
					patches[path.Base(req.URL.Path)]++
				case req.Method != http.MethodGet, q.Has("watch"), q.Has("resourceVersion"), q.Has("continue"):
					// a write, a watch, an informer's list, a list's next page
				case q.Has("limit") || q.Has("labelSelector"):
					lists = append(lists, req.URL.Path+"?"+q.Get("labelSelector"))
				}
				mu.Unlock()
				return rt.RoundTrip(req)
			})
		})
		counted := &cluster{kube: c.kube, dyn: dynamic.NewForConfigOrDie(cfg), cfg: cfg}
		r := reconciler(t, counted, sdktest.Build(t, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, snap, nil)
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		go r.Run(runCtx)
		// sync has the loop make one sync for a change, and returns that
		// sync's lists and patches.
		sync := func() ([]string, map[string]int) {
			t.Helper()
			mu.Lock()
			lists = nil
			clear(patches)
			mu.Unlock()
			if !r.AwaitSync(ctx) {
				t.Fatal("AwaitSync gave up")
			}
			for r.Running() {
				time.Sleep(5 * time.Millisecond)
			}
			if err := r.LastError(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(lists), maps.Clone(patches)
		}
		// The first syncs list (the watches start with them); then only
		// the Secrets, which the CCM may list and not watch.
		var got []string
		for start := time.Now(); ; {
			got, _ = sync()
			if len(got) > 0 && !slices.ContainsFunc(got, func(l string) bool { return !strings.HasSuffix(l, "/secrets?") }) {
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("after 20s a sync still lists %q: want the Secrets alone once the watches are whole", got)
			}
		}
		// Read from the watches, the sync writes what changed and nothing else.
		req := threeByThree()
		req.Services[0].IPs = []string{"145.40.1.97"}
		snap.set(req)
		if _, p := sync(); fmt.Sprint(p) != "map[shop.web:1]" {
			t.Fatalf("a changed Service applied %v, want only its pool", p)
		}
		// An edit by hand is put back: the watch has it, and the next
		// sync (or the one after, if the watch lags the edit) applies the pool.
		u := get(t, c, poolsGVR, "metallb-system", "shop.api", nil)
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"198.51.100.7/32"}, "spec", "addresses")
		if _, err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			if _, p := sync(); p["shop.api"] == 1 {
				break
			}
			if i == 5 {
				t.Fatal("five syncs after an edit by hand, the pool is not applied again")
			}
		}
		var pool metallbv1beta1.IPAddressPool
		get(t, c, poolsGVR, "metallb-system", "shop.api", &pool)
		if pool.Spec.Addresses[0] != "145.40.1.11/32" {
			t.Errorf("the edited pool was not put back: %v", pool.Spec.Addresses)
		}
		// A pool deleted by hand is put back with nothing else asking for
		// a sync: the watch that saw the delete asks.
		old := get(t, c, poolsGVR, "metallb-system", "shop.db", nil)
		if err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").Delete(ctx, "shop.db", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			back, err := c.dyn.Resource(poolsGVR).Namespace("metallb-system").Get(ctx, "shop.db", metav1.GetOptions{})
			if err == nil && back.GetUID() != old.GetUID() {
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatal("a pool deleted by hand is not back 20s later: its delete asked for no sync")
			}
		}
	})

	t.Run("legacy ConfigMap keeps the user's entries", func(t *testing.T) {
		snap := &snapshot{}
		snap.set(threeByThree())
		wasm := sdktest.Build(t, "../../modules/metallb-configmap")
		r := reconciler(t, c, wasm, sdk.Options{Namespace: "metallb-system", ConfigMap: "config"}, snap, nil)

		// Absent ConfigMap: everything else proceeds, and it stays absent.
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.kube.CoreV1().ConfigMaps("metallb-system").Get(ctx, "config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the ConfigMap was created (err %v); upstream leaves it absent", err)
		}

		user := "peers:\n- peer-address: 192.0.2.1\n  peer-asn: 64512\n  my-asn: 64513\naddress-pools:\n- name: user-pool\n  protocol: bgp\n  addresses:\n  - 198.51.100.0/24\n"
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config", Namespace: "metallb-system"},
			Data: map[string]string{"config": user, "other": "kept"}}
		if _, err := c.kube.CoreV1().ConfigMaps("metallb-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := c.kube.CoreV1().ConfigMaps("metallb-system").Get(ctx, "config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Peers []struct {
				PeerAddress string `json:"peer-address"`
			} `json:"peers"`
			Pools []struct {
				Name       string   `json:"name"`
				Addresses  []string `json:"addresses"`
				AutoAssign *bool    `json:"auto-assign"`
			} `json:"address-pools"`
		}
		if err := yaml.Unmarshal([]byte(got.Data["config"]), &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.Peers) != 7 || cfg.Peers[0].PeerAddress != "192.0.2.1" {
			t.Errorf("peers %+v, want the user's first and 6 of the CCM's", cfg.Peers)
		}
		if len(cfg.Pools) != 4 || cfg.Pools[0].Name != "user-pool" || cfg.Pools[1].AutoAssign == nil || *cfg.Pools[1].AutoAssign {
			t.Errorf("pools %+v, want the user's first and 3 of the CCM's with auto-assign false", cfg.Pools)
		}
		if got.Data["other"] != "kept" || got.Labels[sdk.OwnedLabel] != "" {
			t.Errorf("data %v labels %v: the user's key must stay and the ConfigMap must not be marked as owned", got.Data, got.Labels)
		}

		snap.set(sdk.GenerateRequest{Nodes: threeByThree().Nodes})
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got, err = c.kube.CoreV1().ConfigMaps("metallb-system").Get(ctx, "config", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the user's ConfigMap must never be deleted: %v", err)
		}
		if strings.Contains(got.Data["config"], "145.40.1.") || !strings.Contains(got.Data["config"], "user-pool") || !strings.Contains(got.Data["config"], "192.0.2.1") {
			t.Errorf("with no Services only the user's entries stay:\n%s", got.Data["config"])
		}
	})

	t.Run("hostile modules leave the cluster unchanged", func(t *testing.T) {
		snap := &snapshot{}
		snap.set(threeByThree())
		good := reconciler(t, c, hostile(t), sdk.Options{Params: map[string]string{"mode": "ok"}}, snap, nil)
		if err := good.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		rv := get(t, c, cmGVR, "hostile", "fine", nil).GetResourceVersion()
		// The Event names where a crashed module was, from the guest's
		// traceback (or the wasm stack when the deadline stopped it).
		for mode, where := range map[string]string{
			"trap": "fatal error: stack overflow, at main.recurse (main.go:", "loop": "(stopped in main.spin)",
			"membomb": ", at main.generate (main.go:", "badjson": "", "undeclared": "", "othernamespace": "", "error": "",
			"gopanic":  "panic: boom in a goroutine, at main.crash (main.go:",
			"deadlock": "fatal error: all goroutines are asleep - deadlock!, at main.deadlock (main.go:",
		} {
			t.Run(mode, func(t *testing.T) {
				rec := record.NewFakeRecorder(10)
				r := reconciler(t, c, hostile(t), sdk.Options{Params: map[string]string{"mode": mode}}, snap, rec)
				err := r.Sync(ctx)
				if err == nil {
					t.Fatal("sync succeeded")
				}
				if strings.Contains(err.Error(), fakePassword) {
					t.Errorf("error leaks the password: %v", err)
				}
				if got := get(t, c, cmGVR, "hostile", "fine", nil).GetResourceVersion(); got != rv {
					t.Errorf("the last good ConfigMap changed (resourceVersion %s -> %s)", rv, got)
				}
				if _, err := c.kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "evil", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("kube-system/evil exists (err %v)", err)
				}
				if _, err := c.kube.CoreV1().Secrets("hostile").Get(ctx, "stolen", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("hostile/stolen exists (err %v)", err)
				}
				if len(rec.Events) != 1 {
					t.Errorf("%d events, want 1 (one for the cluster, not one per Service)", len(rec.Events))
				}
				for len(rec.Events) > 0 {
					e := <-rec.Events
					if strings.Contains(e, fakePassword) {
						t.Errorf("event leaks the password: %s", e)
					}
					if !strings.Contains(e, where) {
						t.Errorf("event %q does not say %q", e, where)
					}
				}
			})
		}
	})

	t.Run("module node annotations are applied and pruned", func(t *testing.T) {
		snap := &snapshot{}
		snap.set(threeByThree())
		// The core's own annotation, under its own manager, must survive.
		core := []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1","annotations":{"metal.equinix.com/bgp-peers-0-peer-ip":"169.254.255.1"}}}`)
		force := true
		if _, err := c.kube.CoreV1().Nodes().Patch(ctx, "worker-1", "application/apply-patch+yaml", core, metav1.PatchOptions{FieldManager: fieldmanager.CCM, Force: &force}); err != nil {
			t.Fatal(err)
		}
		r := reconciler(t, c, hostile(t), sdk.Options{Params: map[string]string{"mode": "annotate"}}, snap, nil)
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		n, _ := c.kube.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
		if n.Annotations["example.com/speaker"] != "on" {
			t.Fatalf("annotations %v", n.Annotations)
		}
		// A new reconciler (a restart) with a module that wants none.
		r2 := reconciler(t, c, hostile(t), sdk.Options{Params: map[string]string{"mode": "ok"}}, snap, nil)
		if err := r2.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		n, _ = c.kube.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
		if _, ok := n.Annotations["example.com/speaker"]; ok {
			t.Errorf("the annotation was not pruned: %v", n.Annotations)
		}
		if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "169.254.255.1" {
			t.Errorf("the core's annotation was lost: %v", n.Annotations)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
