package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/plan"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// TestIPFamiliesOnDualStackCluster, on an apiserver with IPv4 and IPv6
// Service ranges (where an IPv6 Service can exist at all) and the emulator:
//   - IPv6-only, PreferDualStack and RequireDualStack Services get their
//     addresses, in the order of spec.ipFamilies, one reservation per
//     family, tagged alike;
//   - two dual-stack Services of one sharing key share both addresses;
//   - in a metro without IPv6 Elastic IPs, PreferDualStack gets IPv4 and a
//     Normal Event, RequireDualStack nothing and a Warning;
//   - the nodes' devices get IPv6 BGP sessions once a Service has IPv6;
//   - a restarted CCM adopts both families without a request;
//   - an IPv6 Elastic IP deleted outside the CCM is reported lost and
//     replaced;
//   - deleting a dual-stack Service releases both.
func TestIPFamiliesOnDualStackCluster(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{AuditLog: true, Users: testUsers,
		APIServerFlags: []string{"--service-cluster-ip-range=10.0.0.0/24,fd00:10::/108"}})
	seed := testSeed(2)
	for i := range seed.Metros {
		if seed.Metros[i].Code == "sv" {
			seed.Metros[i].NoIPv6Reservations = true
		}
	}
	// MetalLB in FRR mode, which announces IPv6 (in native mode, the
	// default, the CCM gives no IPv6: TestIPv6WithNativeMetalLB).
	frr := map[string]any{"loadbalancer": "metallb:///metallb-system?bgpType=frr"}
	h := newHarness(t, harnessOptions{env: env, seed: seed, settings: frr})
	h.addNode("node-0", nil)
	h.addNode("node-1", nil)
	prefer, require, single := v1.IPFamilyPolicyPreferDualStack, v1.IPFamilyPolicyRequireDualStack, v1.IPFamilyPolicySingleStack
	port := int32(80)
	create := func(name, metro string, ann map[string]string, policy v1.IPFamilyPolicy, families ...v1.IPFamily) {
		t.Helper()
		a := map[string]string{"metal.equinix.com/eip-metro": metro}
		for k, v := range ann {
			a[k] = v
		}
		s := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: a},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, IPFamilyPolicy: &policy, IPFamilies: families,
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: port}}},
		}
		port++ // Services of one sharing key need ports of their own
		if _, err := h.kube.CoreV1().Services("default").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	shared := map[string]string{"metallb.io/allow-shared-ip": "k"}
	create("dual", "da", nil, prefer)
	create("v6", "da", nil, single, v6)
	create("both", "da", nil, require, v6, v4)
	create("share-a", "da", shared, require)
	create("share-b", "da", shared, require)
	create("sv-prefer", "sv", nil, prefer)
	create("sv-require", "sv", nil, require)

	want := map[string][]v1.IPFamily{"dual": {v4, v6}, "v6": {v6}, "both": {v6, v4}, "share-a": {v4, v6}, "share-b": {v4, v6}, "sv-prefer": {v4}}
	got := map[string][]string{}
	for name, fams := range want {
		h.eventually(name+" has one address per family "+familiesString(fams), func() (bool, string) {
			ips := h.ingress(name)
			got[name] = ips
			return slices.Equal(familiesOf(ips), fams), strings.Join(ips, ",") + "; events: " + h.events(name)
		})
	}
	for _, name := range []string{"dual", "v6", "both"} {
		s, err := h.kube.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ann := s.Annotations[eip.AnnotationLoadBalancerIPs]; ann != strings.Join(got[name], ",") || s.Spec.LoadBalancerIP != "" {
			t.Errorf("%s: %s %q, spec.loadBalancerIP %q; want its addresses in the annotation (what MetalLB reads for IPv6), the field empty", name, eip.AnnotationLoadBalancerIPs, ann, s.Spec.LoadBalancerIP)
		}
	}
	if !slices.Equal(got["share-a"], got["share-b"]) {
		t.Errorf("one sharing key, different addresses: %v and %v", got["share-a"], got["share-b"])
	}
	h.eventually("sv-prefer told it gets IPv4 only", func() (bool, string) {
		evs := h.serviceEvents("sv-prefer", eip.ReasonIPv4Only)
		return len(evs) > 0 && evs[0].Type == v1.EventTypeNormal, h.events("sv-prefer")
	})
	h.eventually("sv-require refused with "+eip.ReasonFamilyUnsupported, func() (bool, string) {
		evs := h.serviceEvents("sv-require", eip.ReasonFamilyUnsupported)
		return len(evs) > 0 && evs[0].Type == v1.EventTypeWarning && strings.Contains(evs[0].Message, "PreferDualStack"), h.events("sv-require")
	})
	if ips := h.ingress("sv-require"); len(ips) != 0 {
		t.Errorf("sv-require got %v", ips)
	}

	// Each family's reservation carries the Service's tags.
	for _, name := range []string{"dual", "both"} {
		tagged := h.emu.ElasticReservations(emulator.DefaultProjectID, eip.Tags(h.clusterID(), "default", name)...)
		var types []string
		for _, r := range tagged {
			types = append(types, r.Type)
		}
		slices.Sort(types)
		if !slices.Equal(types, []string{emulator.TypePublicIPv4, emulator.TypePublicIPv6}) {
			t.Errorf("%s's tagged reservations are %v, want one public_ipv4 and one public_ipv6", name, types)
		}
	}

	// BGP: every node's device gets its IPv6 session.
	for _, d := range h.emu.Devices(emulator.DefaultProjectID) {
		h.eventually(d.Hostname+" has an IPv6 BGP session", func() (bool, string) {
			var fams []string
			for _, s := range h.emu.BGPSessions(d.ID) {
				fams = append(fams, s.AddressFamily)
			}
			return slices.Contains(fams, "ipv6") && slices.Contains(fams, "ipv4"), strings.Join(fams, ",")
		})
	}

	// The module's input has both families: dual's pool holds its /32 and
	// its /128, every node has IPv6 BGPPeers from its IPv6 source and
	// IPv6 annotations beside the IPv4 ones, whose indexes stay.
	dyn := dynamic.NewForConfigOrDie(env.Config)
	h.eventually("dual's pool holds both addresses", func() (bool, string) {
		list, err := dyn.Resource(ipAddressPools).Namespace("metallb-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			addrs, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "addresses")
			if slices.Equal(addrs, []string{got["dual"][0] + "/32", got["dual"][1] + "/128"}) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pools, none with %v", len(list.Items), got["dual"])
	})
	// MetalLB's controller empties the status of a Service whose address
	// is in no pool (one the module has not written yet): the addresses
	// the CCM recorded in the annotation still make dual's pool. Reading
	// the status alone, the next sync pruned the pool and MetalLB never
	// gave the address back (met in the real cluster, test/cluster).
	dualSvc, err := h.kube.CoreV1().Services("default").Get(context.Background(), "dual", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dualSvc.Status.LoadBalancer = v1.LoadBalancerStatus{}
	if _, err := h.kube.CoreV1().Services("default").UpdateStatus(context.Background(), dualSvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A sync after the status was emptied: the one that writes the pool
	// of a Service created after it.
	create("after", "da", nil, single, v4)
	var pools []string
	h.eventually("a pool for after", func() (bool, string) {
		after := h.ingress("after")
		list, err := dyn.Resource(ipAddressPools).Namespace("metallb-system").List(context.Background(), metav1.ListOptions{})
		if err != nil || len(after) != 1 {
			return false, fmt.Sprintf("after's ingress %v; %v", after, err)
		}
		pools = pools[:0]
		found := false
		for _, p := range list.Items {
			addrs, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "addresses")
			pools = append(pools, strings.Join(addrs, " "))
			found = found || slices.Equal(addrs, []string{after[0] + "/32"})
		}
		return found, fmt.Sprintf("pools %v", pools)
	})
	if !slices.Contains(pools, got["dual"][0]+"/32 "+got["dual"][1]+"/128") {
		t.Errorf("pools %v after dual's status was emptied (as MetalLB does): want dual's %v still there", pools, got["dual"])
	}
	h.eventually("each node has two IPv6 BGPPeers and IPv6 annotations", func() (bool, string) {
		list, err := dyn.Resource(bgpPeersGVR).Namespace("metallb-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		v6 := map[string]int{}
		for _, p := range list.Items {
			addr, _, _ := unstructured.NestedString(p.Object, "spec", "peerAddress")
			src, _, _ := unstructured.NestedString(p.Object, "spec", "sourceAddress")
			if strings.HasPrefix(addr, "fc00::") && strings.Contains(src, ":") {
				v6[p.GetName()[:len("node-0")]]++
			}
		}
		for _, n := range []string{"node-0", "node-1"} {
			node, err := h.kube.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			a := node.Annotations
			if v6[n] != 2 || a["metal.equinix.com/bgp-peers-v6-1-peer-ip"] != "fc00::f" || a["metal.equinix.com/bgp-peers-0-peer-ip"] != "169.254.255.1" ||
				!strings.Contains(a["metal.equinix.com/bgp-peers-v6-0-src-ip"], ":") {
				return false, fmt.Sprintf("IPv6 peers %v; %s annotations %v", v6, n, a)
			}
		}
		return true, ""
	})

	// A restart adopts both families: nothing is reserved again (the
	// Services of sv still ask for IPv6, and are refused, at each sync).
	h.Stop()
	before := len(h.emu.ElasticReservations(emulator.DefaultProjectID))
	h2 := newHarness(t, harnessOptions{env: env, emu: h.emu, settings: frr})
	h2.addService("after-restart", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	h2.eventually("after-restart has its address (the restarted CCM is syncing)", func() (bool, string) {
		return len(h2.ingress("after-restart")) == 1, h2.events("after-restart")
	})
	for name := range want {
		if ips := h2.ingress(name); !slices.Equal(ips, got[name]) {
			t.Errorf("after the restart %s has %v, want %v", name, ips, got[name])
		}
	}
	if n := len(h.emu.ElasticReservations(emulator.DefaultProjectID)) - before; n != 1 {
		t.Errorf("the restarted CCM made %d reservations, want 1 (the new Service's)", n)
	}

	// plan, with the CCM stopped, lists a new dual-stack Service's two
	// reservations and a new node's two sessions.
	h2.Stop()
	create("later", "da", nil, prefer)
	dev, err := h.emu.AddDevice(emulator.DeviceSeed{Hostname: "node-2", Metro: "da"})
	if err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}, Spec: v1.NodeSpec{ProviderID: "equinixmetal://" + dev.ID}}
	if _, err := h.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := runPlan(t, env, h.emu, h2.settings)
	var reserve, sessions []string
	for _, e := range run.res.EIPs {
		if e.Action == plan.ActionReserve && e.Service == "default/later" {
			reserve = append(reserve, e.Family)
		}
	}
	for _, s := range run.res.BGPSessions {
		sessions = append(sessions, s.Node+"/"+s.Family)
	}
	if !slices.Equal(reserve, []string{"IPv4", "IPv6"}) || !slices.Equal(sessions, []string{"node-2/ipv4", "node-2/ipv6"}) {
		t.Errorf("plan reserves %v for later and creates the sessions %v; want IPv4 and IPv6, node-2's ipv4 and ipv6:\n%s", reserve, sessions, run.text)
	}
	if !strings.Contains(run.text, "reserve            default/later IPv6 in metro da") {
		t.Errorf("plan's text does not name the IPv6 reservation:\n%s", run.text)
	}
	h3 := newHarness(t, harnessOptions{env: env, emu: h.emu, settings: map[string]any{"cacheRefreshPeriod": "1s", "loadbalancer": frr["loadbalancer"]}})

	// v6's IPv6 Elastic IP deleted in the console: as for IPv4, the Service
	// gets a new one and an ElasticIPLost Event naming both (the CCM wrote
	// the address into the annotation, so it is the CCM's to report).
	own := h.emu.ElasticReservations(emulator.DefaultProjectID, eip.Tags(h3.clusterID(), "default", "v6")...)
	if len(own) != 1 {
		t.Fatalf("v6 has %d reservations, want 1: %s", len(own), reservationsString(own))
	}
	if _, err := h.emu.Client(emulator.DefaultToken).IPAddressesApi.DeleteIPAddress(context.Background(), own[0].ID).Execute(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the CCM's cache refreshes every second here
	touch := []byte(`{"metadata":{"annotations":{"example.com/touched":"1"}}}`)
	if _, err := h3.kube.CoreV1().Services("default").Patch(context.Background(), "v6", types.MergePatchType, touch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h3.eventually("v6 reported lost and moved to a new IPv6 Elastic IP", func() (bool, string) {
		evs := h3.serviceEvents("v6", eip.ReasonLost)
		ips := h3.ingress("v6")
		if len(evs) == 0 || len(ips) != 1 || ips[0] == got["v6"][0] || !slices.Equal(familiesOf(ips), []v1.IPFamily{v6}) {
			return false, strings.Join(ips, ",") + "; events: " + h3.events("v6")
		}
		return strings.Contains(evs[0].Message, got["v6"][0]) && strings.Contains(evs[0].Message, ips[0]), "the Event does not name both addresses: " + evs[0].Message
	})

	// Deleting a dual-stack Service releases both of its addresses.
	if err := h3.kube.CoreV1().Services("default").Delete(context.Background(), "dual", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h3.eventually("dual's two reservations released", func() (bool, string) {
		left := h.emu.ElasticReservations(emulator.DefaultProjectID, eip.Tags(h3.clusterID(), "default", "dual")...)
		return len(left) == 0, "left: " + reservationsString(left)
	})
	// The deploy manifests' RBAC allows every call made for IPv6 (the
	// annotation patches, the node annotations).
	h3.checkRBAC()
}

// ingress is the Service's status addresses, in order.
func (h *harness) ingress(name string) []string {
	s, err := h.kube.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

func familiesOf(ips []string) []v1.IPFamily {
	var out []v1.IPFamily
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
			out = append(out, v1.IPv4Protocol)
		} else {
			out = append(out, v1.IPv6Protocol)
		}
	}
	return out
}

func familiesString(fams []v1.IPFamily) string {
	var s []string
	for _, f := range fams {
		s = append(s, string(f))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func reservationsString(rs []emulator.Reservation) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.Prefix.String())
	}
	return strings.Join(s, ",")
}

// TestIPv6WithNativeMetalLB: with MetalLB in native mode (the default
// loadbalancer setting, no bgpType=frr), which announces IPv4 only and
// refuses its whole configuration once a pool holds IPv6, the CCM gives no
// IPv6: a PreferDualStack Service gets its IPv4 Elastic IP and a Normal
// Event naming the fix, an IPv6-only Service a Warning; no IPv6
// reservation or BGP session is made, and MetalLB's pools hold IPv4 only.
func TestIPv6WithNativeMetalLB(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Users: testUsers, APIServerFlags: []string{"--service-cluster-ip-range=10.0.0.0/24,fd00:10::/108"}})
	h := newHarness(t, harnessOptions{env: env})
	h.addNode("node-0", nil)
	prefer, single := v1.IPFamilyPolicyPreferDualStack, v1.IPFamilyPolicySingleStack
	for name, spec := range map[string]v1.ServiceSpec{
		"dual": {IPFamilyPolicy: &prefer},
		"v6":   {IPFamilyPolicy: &single, IPFamilies: []v1.IPFamily{v1.IPv6Protocol}},
	} {
		spec.Type, spec.Ports = v1.ServiceTypeLoadBalancer, []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}
		s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{"metal.equinix.com/eip-metro": "da"}}, Spec: spec}
		if _, err := h.kube.CoreV1().Services("default").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const fix = "bgpType=frr"
	h.eventually("dual gets IPv4 only, told why", func() (bool, string) {
		evs := h.serviceEvents("dual", eip.ReasonIPv4Only)
		ips := h.ingress("dual")
		return len(evs) > 0 && strings.Contains(evs[0].Message, fix) && len(ips) == 1 && !strings.Contains(ips[0], ":"),
			strings.Join(ips, ",") + "; events: " + h.events("dual")
	})
	h.eventually("v6 refused with "+eip.ReasonFamilyUnsupported, func() (bool, string) {
		evs := h.serviceEvents("v6", eip.ReasonFamilyUnsupported)
		return len(evs) > 0 && evs[0].Type == v1.EventTypeWarning && strings.Contains(evs[0].Message, fix), h.events("v6")
	})
	for _, r := range h.emu.ElasticReservations(emulator.DefaultProjectID) {
		if r.Type == emulator.TypePublicIPv6 {
			t.Errorf("an IPv6 reservation was made: %s", reservationsString([]emulator.Reservation{r}))
		}
	}
	for _, d := range h.emu.Devices(emulator.DefaultProjectID) {
		for _, s := range h.emu.BGPSessions(d.ID) {
			if s.AddressFamily == "ipv6" {
				t.Errorf("%s got an IPv6 BGP session", d.Hostname)
			}
		}
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	var pools []unstructured.Unstructured
	h.eventually("the module wrote dual's pool", func() (bool, string) {
		list, err := dyn.Resource(ipAddressPools).Namespace("metallb-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		pools = list.Items
		return len(pools) == 1, fmt.Sprintf("%d pools", len(pools))
	})
	for _, p := range pools {
		addrs, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "addresses")
		if !slices.Equal(addrs, []string{h.ingress("dual")[0] + "/32"}) {
			t.Errorf("pool %s holds %v, want dual's IPv4 /32 alone (native MetalLB refuses IPv6)", p.GetName(), addrs)
		}
	}
}
