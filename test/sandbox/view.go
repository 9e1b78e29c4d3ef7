package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// Viewer draws the live view: Services with their Elastic IPs, nodes with
// their BGP peers, the objects the module generated, and the control-plane
// EIP's holder.
type Viewer struct {
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	emu        *emulator.Emulator
	lb         string
	cpEIP      string
	plain      bool
	started    time.Time
	failedAt   time.Time
	failedNode string
	movedAfter time.Duration
	notes      []string
	clusterID  string
	// routers and nodeByIP (a node's address -> its name) are set with
	// the data plane.
	routers  []*dataplane.Router
	nodeByIP map[string]string
}

// Note adds a line under the view, stamped with the time since start.
func (v *Viewer) Note(format string, args ...any) {
	v.notes = append(v.notes, fmt.Sprintf("%s  %s", time.Since(v.started).Round(time.Second), fmt.Sprintf(format, args...)))
}

// Holder is the hostname of the device holding the control-plane EIP.
func (v *Viewer) Holder() string {
	r, ok := v.emu.Reservation(v.cpEIP)
	if !ok {
		return ""
	}
	for _, a := range r.Assignments {
		if d, ok := v.emu.Device(a.Device); ok {
			return d.Hostname
		}
	}
	return ""
}

var (
	gvrPools = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}
	gvrPeers = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}
	gvrAdvs  = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "bgpadvertisements"}
)

// Draw prints the view (after clearing the screen unless plain).
func (v *Viewer) Draw(ctx context.Context) {
	if v.clusterID == "" {
		if ns, err := v.kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil {
			v.clusterID = string(ns.UID)
		}
	}
	var b strings.Builder
	if !v.plain {
		b.WriteString("\033[H\033[2J")
	}
	fmt.Fprintf(&b, "Equinix Metal CCM sandbox — %s since start — loadbalancer %s — Ctrl-C to stop\n\n", time.Since(v.started).Round(time.Second), v.lb)
	svcByIP := v.drawServices(ctx, &b)
	b.WriteString("\n")
	if len(v.routers) > 0 {
		v.drawRouters(ctx, &b, svcByIP)
		b.WriteString("\n")
	}
	v.drawNodes(ctx, &b)
	b.WriteString("\nLoad-balancer objects the module generated:\n")
	v.drawModuleObjects(ctx, &b)
	v.drawControlPlane(&b)
	if len(v.notes) > 0 {
		b.WriteString("\n")
		for _, n := range v.notes {
			b.WriteString("  " + n + "\n")
		}
	}
	fmt.Print(b.String())
}

// drawServices: each LoadBalancer Service, its address, its reservation at
// Equinix and its latest Event. It returns the Services by address.
func (v *Viewer) drawServices(ctx context.Context, b *strings.Builder) map[string]string {
	byIP := map[string]string{}
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tEXTERNAL-IP\tELASTIC IP (Equinix)\tLATEST EVENT")
	svcs, _ := v.kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	for _, s := range svcs.Items {
		if s.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue
		}
		ext := "<pending>"
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			ext = s.Status.LoadBalancer.Ingress[0].IP
			byIP[ext] = s.Namespace + "/" + s.Name
		}
		res := "-"
		if v.clusterID != "" {
			for _, r := range v.emu.Reservations(emulator.DefaultProjectID, eip.Tags(v.clusterID, s.Namespace, s.Name)...) {
				res = fmt.Sprintf("%s metro %s, %s", r.Prefix, r.Metro, r.State)
			}
		}
		if s.Spec.LoadBalancerIP != "" && res == "-" {
			res = "none: bring your own IP"
		}
		if s.Namespace == "kube-system" {
			res = "control-plane EIP"
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\n", s.Namespace, s.Name, ext, res, v.lastEvent(ctx, s.Namespace, s.Name))
	}
	_ = tw.Flush()
	return byIP
}

// drawRouters: what the two routers hold, as Equinix's would: each /32
// with its next hops (one per node whose speaker announces it; with
// multipath the router spreads traffic over all of them), and how many
// nodes have a BGP session up.
func (v *Viewer) drawRouters(ctx context.Context, b *strings.Builder, svcByIP map[string]string) {
	var sessions []string
	for _, r := range v.routers {
		up, err := r.Established(ctx)
		if err != nil {
			sessions = append(sessions, fmt.Sprintf("%s: %v", r.Name, err))
			continue
		}
		sessions = append(sessions, fmt.Sprintf("%s (%s) %d/%d", r.Name, r.Addr, len(up), len(r.Neighbors)))
	}
	fmt.Fprintf(b, "Routers (GoBGP as Equinix's, AS%d, multipath), BGP sessions up: %s\n", dataplane.RouterASN, strings.Join(sessions, ", "))
	all, err := dataplane.Prefixes(ctx, v.routers)
	if err != nil {
		fmt.Fprintf(b, "  reading the routers' tables: %v\n", err)
		return
	}
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PREFIX\tSERVICE\tNEXT HOPS AT "+strings.ToUpper(v.routers[0].Name)+"\tAT THE OTHER")
	prefixes := slices.Sorted(maps.Keys(all))
	for _, p := range prefixes {
		first := v.hops(all[p][v.routers[0].Addr])
		other := "-"
		for _, r := range v.routers[1:] {
			if o := v.hops(all[p][r.Addr]); o == first {
				other = "the same"
			} else {
				other = o
			}
		}
		svc := svcByIP[strings.TrimSuffix(p, "/32")]
		if svc == "" {
			svc = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p, svc, first, other)
	}
	if len(prefixes) == 0 {
		fmt.Fprintln(tw, "  (no route yet)\t\t\t")
	}
	_ = tw.Flush()
}

// hops names a prefix's next hops by node: "3: cp-0 cp-1 worker-0".
func (v *Viewer) hops(paths []dataplane.Path) string {
	if len(paths) == 0 {
		return "none"
	}
	var names []string
	for _, p := range paths {
		n := v.nodeByIP[p.NextHop]
		if n == "" {
			n = p.NextHop
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("%d: %s", len(names), strings.Join(names, " "))
}

// drawNodes: each node, its provider ID, location and BGP peers.
func (v *Viewer) drawNodes(ctx context.Context, b *strings.Builder) {
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPROVIDER ID\tREGION/ZONE\tINTERNAL IP\tBGP PEERS (from annotations)")
	nodes, _ := v.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		var internal string
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				internal = a.Address
				break
			}
		}
		var peers []string
		for i := 0; ; i++ {
			ip := n.Annotations[fmt.Sprintf("metal.equinix.com/bgp-peers-%d-peer-ip", i)]
			if ip == "" {
				break
			}
			peers = append(peers, fmt.Sprintf("%s AS%s", ip, n.Annotations[fmt.Sprintf("metal.equinix.com/bgp-peers-%d-peer-asn", i)]))
		}
		pid := n.Spec.ProviderID
		if pid == "" {
			pid = "<uninitialised>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\n", n.Name, pid, n.Labels[v1.LabelTopologyRegion], n.Labels[v1.LabelTopologyZone], internal, strings.Join(peers, ", "))
	}
	_ = tw.Flush()
}

// drawModuleObjects: the MetalLB objects and owned ConfigMaps the module
// wrote, and in legacy mode the merged ConfigMap.
func (v *Viewer) drawModuleObjects(ctx context.Context, b *strings.Builder) {
	for _, g := range []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{gvrPools, "IPAddressPool"}, {gvrPeers, "BGPPeer"}, {gvrAdvs, "BGPAdvertisement"}} {
		list, err := v.dyn.Resource(g.gvr).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		var names []string
		for _, o := range list.Items {
			names = append(names, o.GetNamespace()+"/"+o.GetName())
		}
		sort.Strings(names)
		fmt.Fprintf(b, "  %-17s %d: %s\n", g.kind, len(names), summarise(names, 6))
	}

	v.drawAnnouncers(ctx, b)

	cms, err := v.kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: sdk.OwnedLabel})
	if err == nil && len(cms.Items) > 0 {
		var names []string
		for _, cm := range cms.Items {
			names = append(names, fmt.Sprintf("%s/%s (%d keys)", cm.Namespace, cm.Name, len(cm.Data)))
		}
		sort.Strings(names)
		fmt.Fprintf(b, "  %-17s %d: %s\n", "ConfigMap", len(names), summarise(names, 6))
	}
	if lb, err := config.ParseLoadBalancer(v.lb); err == nil && lb.Kind == config.LBMetalLBConfigMap {
		if cm, err := v.kube.CoreV1().ConfigMaps(lb.Namespace).Get(ctx, lb.ConfigMap, metav1.GetOptions{}); err == nil {
			var legacy struct {
				Pools []struct {
					Name string `json:"name"`
				} `json:"address-pools"`
				Peers []any `json:"peers"`
			}
			_ = yaml.Unmarshal([]byte(cm.Data["config"]), &legacy)
			var pools []string
			for _, p := range legacy.Pools {
				pools = append(pools, p.Name)
			}
			fmt.Fprintf(b, "  %-17s %s/%s: %d peers; address pools: %s\n", "legacy ConfigMap", lb.Namespace, lb.ConfigMap, len(legacy.Peers), strings.Join(pools, ", "))
		}
	}
}

// drawAnnouncers: for each IPAddressPool, the nodes MetalLB's speakers
// announce it from, by MetalLB's rule over what the module wrote: a node
// announces a pool if one of the pool's BGPAdvertisements (one listing it
// by name or selecting it by label; one with neither lists every pool)
// selects the node (no nodeSelectors: every node) and a BGPPeer selects it.
// With the data plane, the routers' table shows what they accepted.
func (v *Viewer) drawAnnouncers(ctx context.Context, b *strings.Builder) {
	pools, err := v.dyn.Resource(gvrPools).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil || len(pools.Items) == 0 {
		return
	}
	advs, err := v.dyn.Resource(gvrAdvs).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	peers, err := v.dyn.Resource(gvrPeers).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	nodes, err := v.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	// selects reports whether the selectors at path of o select set; none
	// selects everything.
	selects := func(o unstructured.Unstructured, set labels.Set, path ...string) bool {
		raw, _, _ := unstructured.NestedSlice(o.Object, path...)
		if len(raw) == 0 {
			return true
		}
		for _, r := range raw {
			var ls metav1.LabelSelector
			if m, ok := r.(map[string]any); !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls) != nil {
				continue
			}
			if sel, err := metav1.LabelSelectorAsSelector(&ls); err == nil && sel.Matches(set) {
				return true
			}
		}
		return false
	}
	peered := map[string]bool{}
	for _, n := range nodes.Items {
		for _, p := range peers.Items {
			if selects(p, n.Labels, "spec", "nodeSelectors") {
				peered[n.Name] = true
			}
		}
	}
	fmt.Fprintln(b, "  announced from (MetalLB's rule over the advertisements and peers above):")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	for _, p := range pools.Items {
		addrs, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "addresses")
		from := map[string]bool{}
		for _, a := range advs.Items {
			if a.GetNamespace() != p.GetNamespace() {
				continue
			}
			names, _, _ := unstructured.NestedStringSlice(a.Object, "spec", "ipAddressPools")
			sels, _, _ := unstructured.NestedSlice(a.Object, "spec", "ipAddressPoolSelectors")
			listed := slices.Contains(names, p.GetName()) || len(names) == 0 && len(sels) == 0
			if !listed && len(sels) > 0 {
				listed = selects(a, p.GetLabels(), "spec", "ipAddressPoolSelectors")
			}
			if !listed {
				continue
			}
			for _, n := range nodes.Items {
				if peered[n.Name] && selects(a, n.Labels, "spec", "nodeSelectors") {
					from[n.Name] = true
				}
			}
		}
		names := slices.Sorted(maps.Keys(from))
		fmt.Fprintf(tw, "    %s\t%s\t%d: %s\n", p.GetName(), strings.Join(addrs, ","), len(names), strings.Join(names, " "))
	}
	_ = tw.Flush()
}

// drawControlPlane: the EIP's holder, and how long a failover took.
func (v *Viewer) drawControlPlane(b *strings.Builder) {
	holder := v.Holder()
	fmt.Fprintf(b, "\nControl-plane EIP holder: %s", holder)
	if v.failedNode != "" {
		if holder != v.failedNode && holder != "" && v.movedAfter == 0 {
			v.movedAfter = time.Since(v.failedAt)
			v.Note("failover: the EIP moved from %s to %s in %s", v.failedNode, holder, v.movedAfter.Round(100*time.Millisecond))
		}
		if v.movedAfter == 0 {
			fmt.Fprintf(b, " (its /healthz is down for %s; waiting for the CCM to move it)", time.Since(v.failedAt).Round(time.Second))
		}
	}
	b.WriteString("\n")
}

func (v *Viewer) lastEvent(ctx context.Context, ns, name string) string {
	list, err := v.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return eventTime(list.Items[i]).Before(eventTime(list.Items[j]))
	})
	e := list.Items[len(list.Items)-1]
	msg := e.Message
	if len(msg) > 110 {
		msg = msg[:107] + "..."
	}
	return e.Reason + ": " + msg
}

func eventTime(e v1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func summarise(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(", … (%d more)", len(names)-max)
}
