package plan

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/bgp"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/instances"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// planBGP runs the project set-up, the selection policy and the per-node
// annotation rules, and returns the BGP nodes the module would get.
func (p *Planner) planBGP(ctx context.Context, mc *metalCapture, nodes []*v1.Node, ipv6 bool, res *Result) ([]lbsnapshot.Node, error) {
	if _, err := bgp.EnableProject(ctx, mc, p.Config.LocalASN, p.Config.BGPPass); err != nil {
		return nil, err
	}
	if asn := mc.Take().ProjectASN; asn != nil {
		res.ProjectBGP = fmt.Sprintf("enable BGP on the project with ASN %d", *asn)
	}
	sel, err := p.LB.Selector.SelectNodes(ctx, nodes)
	if err != nil {
		return nil, fmt.Errorf("BGP node selection: %w", err)
	}
	t := lbsnapshot.TemplatesFrom(p.Config)
	var out []lbsnapshot.Node
	for _, n := range nodes {
		want := map[string]string{}
		if sel[n.Name] {
			if n.Spec.ProviderID == "" {
				continue // the node controller sets it first
			}
			deviceID, err := instances.DeviceID(n.Spec.ProviderID)
			if err != nil {
				continue // not an Equinix Metal node
			}
			bn, err := p.planNode(ctx, mc, n, deviceID, ipv6, res)
			if err != nil {
				return nil, err
			}
			out = append(out, bn)
			want = bgp.Annotations(t, bn)
		}
		if ch, ok := annotationChange(n, bgp.AnnotationPatch(t, n.Annotations, want)); ok {
			res.Annotations = append(res.Annotations, ch)
		}
	}
	return out, nil
}

// planNode is the BGP controller's fetch of one node: its sessions (IPv6
// too when a Service has IPv6), its neighbours and its device.
func (p *Planner) planNode(ctx context.Context, mc *metalCapture, n *v1.Node, deviceID string, ipv6 bool, res *Result) (lbsnapshot.Node, error) {
	if err := mc.EnsureDeviceBGPSession(ctx, deviceID); err != nil {
		return lbsnapshot.Node{}, fmt.Errorf("reading the BGP sessions of device %s (node %s): %w", deviceID, n.Name, err)
	}
	if ipv6 {
		if err := mc.EnsureDeviceBGPSessionIPv6(ctx, deviceID); err != nil {
			return lbsnapshot.Node{}, fmt.Errorf("reading the BGP sessions of device %s (node %s): %w", deviceID, n.Name, err)
		}
	}
	w := mc.Take()
	if len(w.Sessions) > 0 {
		res.BGPSessions = append(res.BGPSessions, bgpSession{Node: n.Name, Device: deviceID, Family: "ipv4"})
	}
	if len(w.Sessions6) > 0 {
		res.BGPSessions = append(res.BGPSessions, bgpSession{Node: n.Name, Device: deviceID, Family: "ipv6"})
	}
	neighbours, err := p.Metal.DeviceBGPNeighbors(ctx, deviceID)
	if err != nil {
		return lbsnapshot.Node{}, fmt.Errorf("reading the BGP neighbours of device %s (node %s): %w", deviceID, n.Name, err)
	}
	device, err := p.Metal.Device(ctx, deviceID)
	if err != nil {
		return lbsnapshot.Node{}, fmt.Errorf("reading device %s (node %s): %w", deviceID, n.Name, err)
	}
	return bgp.NodeFrom(n, deviceID, device, neighbours), nil
}

func annotationChange(n *v1.Node, patch map[string]*string) (nodeAnnotationChange, bool) {
	if len(patch) == 0 {
		return nodeAnnotationChange{}, false
	}
	ch := nodeAnnotationChange{Node: n.Name, Set: map[string]string{}}
	for k, v := range patch {
		if v == nil {
			ch.Remove = append(ch.Remove, k)
		} else {
			ch.Set[k] = *v
		}
	}
	sort.Strings(ch.Remove)
	return ch, true
}
