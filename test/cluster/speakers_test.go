//go:build cluster && linux

package cluster

import (
	"context"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestCloudSpeakers runs the short cloud check once per BGP speaker that
// TestCloudTraffic (MetalLB 0.15.3, native) does not already run, each in
// a cluster behind Equinix's gateway: MetalLB 0.16.1 in native mode,
// MetalLB 0.16.1 with FRR-K8s (its default backend), MetalLB 0.16.1 in
// FRR mode (TestCloudDualStack's speaker, here with BFD and a node lost),
// MetalLB 0.12.1 configured by the CCM's ConfigMap, and kube-vip v1.2 as
// a DaemonSet. Each subtest is one row of
// the speaker table of TESTING.md: sessions with both peers from every speaker
// node, a Service's Elastic IP at both routers with one path per speaker
// node and answering HTTP and UDP, a Local Service announced only from its
// endpoint's node, 20 Service changes without a session reset, and a node
// failure survived. Run one with -run 'TestCloudSpeakers/kube-vip'.
func TestCloudSpeakers(t *testing.T) {
	for _, name := range []string{"metallb-0.16.1-native", "metallb-0.16.1-frr-k8s", "metallb-0.16.1-frr", "metallb-0.12.1-configmap", "kube-vip"} {
		t.Run(name, func(t *testing.T) {
			o := speakerOptions(t, name)
			// The fastest timers the CCM offers: a node failure costs the
			// hold time, not MetalLB's default 90 s (kube-vip takes no
			// timer from the CCM and keeps its own).
			o.Values = mergeValues(map[string]any{"config": map[string]any{"bgpHoldTime": "3s", "bgpKeepaliveTime": "1s"}}, o.Values)
			if o.FRR != "" {
				// And BFD, which FRR runs (FRR-K8s, and MetalLB's FRR
				// mode): a dead node's routes go when BFD says so, not
				// when a hold timer runs out and graceful restart keeps
				// them 120 s more.
				o.Values = mergeValues(o.Values, map[string]any{"config": map[string]any{"bgpBFDInterval": bfdInterval}})
			}
			speakerCheck(t, startCloud(t, o))
		})
	}
}

// bfdInterval is the BFD interval TestCloudSpeakers sets for FRR's speakers:
// MetalLB's default profile's, 300 ms, three missed and the node is down.
const bfdInterval = "300ms"

// speakerNames are what speakerOptions knows (CONFORMANCE_SPEAKER's
// values), the first the default.
var speakerNames = []string{"native", "metallb-0.16.1-native", "frr", "frr-k8s", "configmap", "kube-vip"}

// speakerOptions are a cloud cluster's options for one speaker: native is
// MetalLB 0.15.3 (TestCloudTraffic's), frr MetalLB 0.16.1 in FRR mode,
// dual-stack (TestCloudDualStack's), frr-k8s MetalLB 0.16.1 with its
// FRR-K8s backend, dual-stack too: TestCloudSpeakers checks the IPv6
// sessions, BFD over them and a node failure through an IPv6 address of
// both.
func speakerOptions(t *testing.T, name string) *CloudOptions {
	t.Helper()
	switch name {
	case "native", "":
		return cloudOptions(t)
	case "metallb-0.16.1-native":
		o := cloudOptions(t)
		o.MetalLBManifest, o.MetalLBBins = needEnv(t, "METAL_CCM_CLUSTER_METALLB_FRR_MANIFEST"), needEnv(t, "METAL_CCM_CLUSTER_METALLB_FRR_BINS")
		return o
	case "metallb-0.16.1-frr", "frr":
		return dualStackOptions(t)
	case "metallb-0.12.1-configmap", "configmap":
		o := cloudOptions(t)
		o.MetalLBManifest, o.MetalLBBins = needEnv(t, "METAL_CCM_CLUSTER_METALLB_LEGACY_MANIFEST"), needEnv(t, "METAL_CCM_CLUSTER_METALLB_LEGACY_BINS")
		o.Legacy = true
		return o
	case "kube-vip":
		o := cloudOptions(t)
		o.KubeVIP = needEnv(t, "METAL_CCM_CLUSTER_KUBE_VIP")
		return o
	case "metallb-0.16.1-frr-k8s", "frr-k8s":
		o := cloudOptions(t)
		o.MetalLBManifest, o.MetalLBBins = needEnv(t, "METAL_CCM_CLUSTER_METALLB_FRR_K8S_MANIFEST"), needEnv(t, "METAL_CCM_CLUSTER_METALLB_FRR_BINS")
		o.FRR, o.FRRK8s = needEnv(t, "METAL_CCM_CLUSTER_FRR"), needEnv(t, "METAL_CCM_CLUSTER_FRR_K8S")
		o.DualStack = true
		return o
	}
	t.Fatalf("unknown speaker %q: want one of %s", name, strings.Join(speakerNames, ", "))
	return nil
}

func needEnv(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		t.Fatalf("%s unset: run make cluster-test", key)
	}
	return v
}

// speakerCheck is the short cloud check on a started cluster (see
// TestCloudSpeakers).
func speakerCheck(t *testing.T, c *Cluster) {
	ctx := context.Background()
	speaker := c.cloud.Speaker()

	// A Cluster-policy Service with a pod on each worker: every node
	// announces it (kube-proxy forwards from any node).
	ip, created := clusterWeb(t, c)
	url := "http://" + net.JoinHostPort(ip, "80")
	if _, err := untilAnswers(c, url+"/hostname", 2*time.Minute); err != nil {
		t.Fatalf("%v; routers' next hops for %s: %v", err, ip, nexthops(t, c, ip))
	}
	first := time.Since(created)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitSessions(sctx, false); err != nil {
		t.Fatal(err)
	}
	sessions := 0
	for _, r := range c.Routers {
		n4, _, err := r.Established()
		if err != nil {
			t.Fatal(err)
		}
		sessions += n4
	}
	var dual6 string
	if c.DualStack {
		// The IPv6 sessions come with the first IPv6 Elastic IP (the CCM
		// then asks Equinix for each node's IPv6 session): a dual-stack
		// Service brings them up, so that BFD runs over them too.
		_, dual6 = dualStackService(t, c, "web-dual")
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := c.WaitSessions(sctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if c.cloud.configValue("bgpBFDInterval") != "" {
		bfdUpWithEverySpeaker(t, c)
	}
	// Every node with a speaker announces (one path each), and no other.
	want := speakerNodeIPs(c)
	var hops []string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if hops = nexthops(t, c, ip); slices.Equal(hops, want) {
			break
		}
	}
	if !slices.Equal(hops, want) {
		t.Errorf("routers forward %s to %v: want the nodes with a speaker, %v %v, one path each", ip, hops, c.SpeakerNodes(), want)
	}
	pods := map[string]int{}
	failed := 0
	for _, src := range ClientIPs() {
		name, waited, err := getSettled(c, src, url+"/hostname")
		if err != nil {
			failed++
			t.Errorf("from %s: %v", src, err)
			continue
		}
		if waited > time.Second {
			t.Logf("from %s: answered after %s of retries (a node's kube-proxy behind its speaker)", src, waited.Round(100*time.Millisecond))
		}
		pods[name]++
	}
	if len(pods) != 2 {
		t.Errorf("answers came from pods %v: want both", pods)
	}
	udp, err := c.UDPExchange("", net.JoinHostPort(ip, "90"), "hostname", 3*time.Second)
	if err != nil || pods[udp] == 0 {
		t.Errorf("UDP hostname through %s:90 = %q, %v: want one of the pods %v", ip, udp, err, pods)
	}

	// A Local Service with its one pod on node-3: announced from node-3
	// only, and the pod sees the client's own address.
	lip, lip6, lhops := localOnlyFromItsNode(t, c)

	// 20 Service changes reset no session at the routers.
	serviceChurnKeepsSessions(t, c, 10)
	// The way from creation to the first answer, stage by stage, for 50
	// Services at once with this speaker (TestCloudTraffic's table is
	// MetalLB 0.15.3 native's). Not in make ci, for its time budget.
	if fullRun() {
		stageTable(t, c, 50)
	}

	m := c.Monitor()
	defer m.Stop()
	m.Watch("web", ip)
	m.Watch("local", lip)
	if dual6 != "" {
		// The node failure over IPv6 too: its own sessions, and BFD's.
		m.Watch("web-dual-v6", dual6)
	}
	if lip6 != "" {
		m.Watch("local-v6", lip6)
	}
	nodeDownBlackHole(t, c, m, speaker, false) // the cluster ends here
	t.Logf("speaker %s: %d sessions at the routers (speakers on %v); web's %s first answered %s after creation, via %d nodes %v, %d of 16 client addresses failed, UDP answered by %q; Local %s via %v",
		speaker, sessions, c.SpeakerNodes(), ip, first.Round(time.Millisecond), len(hops), hops, failed, udp, lip, lhops)
}

// bfdUpWithEverySpeaker checks that each router has a BFD session up with
// every node that runs a speaker (the CCM was told bgpBFDInterval), over
// each family's sessions in a dual-stack cluster (whose IPv6 sessions the
// caller brought up).
func bfdUpWithEverySpeaker(t *testing.T, c *Cluster) {
	t.Helper()
	want := speakerNodeIPs(c)
	if c.DualStack {
		want = append(want, speakerNodeIPv6s(c)...)
		sort.Strings(want)
	}
	for _, r := range c.Routers {
		var up []string
		var err error
		// BFD comes up once FRR has the profile: a sync and a reload
		// after the BGP sessions.
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
			if up, err = r.BFDUp(); err == nil && slices.Equal(up, want) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(up, want) {
			out, _ := r.Birdc("show", "bfd", "sessions")
			t.Errorf("%s has BFD up with %v, want every speaker node %v; birdc show bfd sessions:\n%s", r.Name, up, want, out)
		}
	}
	t.Logf("BFD (%s) up at both routers with %v", c.cloud.configValue("bgpBFDInterval"), want)
}

// speakerNodeIPv6s are the IPv6 addresses of the nodes that run a speaker.
func speakerNodeIPv6s(c *Cluster) []string {
	var ips []string
	for _, name := range c.SpeakerNodes() {
		for _, n := range c.Nodes {
			if n.Name == name && n.IPv6 != "" {
				ips = append(ips, n.IPv6)
			}
		}
	}
	return ips
}

// speakerNodeIPs are the addresses of the nodes that run a speaker, sorted.
func speakerNodeIPs(c *Cluster) []string {
	var ips []string
	for _, name := range c.SpeakerNodes() {
		for _, n := range c.Nodes {
			if n.Name == name {
				ips = append(ips, n.IP)
			}
		}
	}
	sort.Strings(ips)
	return ips
}
