package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

// eipPlanner runs eip.Manager over the capturing layers, one Service at a
// time, and turns what it captured into plan entries.
type eipPlanner struct {
	// noIPv6 is why the load balancer cannot announce IPv6 ("" = it can).
	noIPv6   string
	policies policySource
	mc       *metalCapture
	all      []metalv1.IPReservation
	res      *Result
	rec      *Recorder
	kube     *kubeCapture
	placer   eip.Placer
}

func (p *eipPlanner) run(ctx context.Context, ro *rest.Config, clusterID string, svcs []*v1.Service) (map[string][]string, error) {
	kw, err := kubernetes.NewForConfig(p.kube.Config(ro))
	if err != nil {
		return nil, err
	}
	m := eip.NewManager(p.mc, kw, p.placer, p.rec, clusterID)
	m.SetIPv6Unsupported(p.noIPv6)
	m.SetServices(eip.Services{List: func() ([]*v1.Service, error) { return svcs, nil }, Synced: func() bool { return true }})
	addrs := map[string][]string{}
	for _, s := range svcs {
		if lbsnapshot.IsControlPlaneService(s.Namespace, s.Name) {
			continue // its own loop, never an Elastic IP of the Service kind
		}
		switch {
		case needsCleanup(s):
			why := "the Service is being deleted"
			if s.DeletionTimestamp == nil {
				why = "the Service is no longer of type LoadBalancer"
			}
			err := m.Release(ctx, s)
			p.collect(s, nil, err, why)
		case lbsnapshot.WantsLoadBalancer(s):
			ips, err := m.Ensure(ctx, s)
			if len(ips) > 0 {
				addrs[id(s)] = ips
			}
			p.collect(s, ips, err, "")
			for _, ip := range ips {
				p.placement(ctx, s, ip)
			}
		}
	}
	return addrs, nil
}

// collect turns what one Service's Ensure or Release captured into
// entries.
func (p *eipPlanner) collect(s *v1.Service, ips []string, err error, releaseWhy string) {
	name := id(s)
	captured := p.mc.Take()
	writes := p.kube.Take()
	reason := reasons(p.rec.Take(name))
	for _, r := range captured.Requests {
		fam, what := "IPv4", "no reservation of the Service's IPv4 family carries its tags"
		if r.IPv6 {
			fam, what = "IPv6", "no reservation of the Service's IPv6 family carries its tags (a public_ipv6 /128)"
		}
		p.add(eipChange{Action: ActionReserve, Service: name, Location: r.Location.String(), Family: fam,
			Reason: fmt.Sprintf("%s; the placement policy (%s) decided %s", what, p.policies.Source(), r.Location)})
	}
	for _, d := range captured.Deletes {
		why := releaseWhy
		if why == "" {
			why = reason
		}
		p.add(eipChange{Action: ActionRelease, Service: name, Address: p.address(d), Reason: why})
	}
	var pending *cloudapi.RetryError
	switch {
	case err != nil && len(captured.Requests) == 0 && errors.As(err, &pending):
		p.add(eipChange{Action: ActionWait, Service: name, Reason: err.Error()})
	case err != nil && len(captured.Requests) == 0:
		p.add(eipChange{Action: actionRefuse, Service: name, Reason: err.Error()})
	}
	for _, ip := range ips {
		if !inStatus(s, ip) {
			p.addStatus(name, ip)
		}
	}
	for _, w := range writes {
		if w.Method == "PATCH" && strings.Contains(w.Body, `"loadBalancerIP"`) {
			p.add(eipChange{Action: ActionSetLoadBalancerIP, Service: name, Address: loadBalancerIPOf(w.Body), Reason: "the CCM writes the Elastic IP into spec.loadBalancerIP, where load balancers written for upstream read it"})
			continue
		}
		p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("the Elastic IP code for Service %s would also %s %s", name, w.Method, w.Path))
	}
}

// loadBalancerIPOf is the address a Service patch writes into
// spec.loadBalancerIP.
func loadBalancerIPOf(body string) string {
	var patch struct {
		Spec struct {
			LoadBalancerIP string `json:"loadBalancerIP"`
		} `json:"spec"`
	}
	_ = json.Unmarshal([]byte(body), &patch)
	return patch.Spec.LoadBalancerIP
}

// addStatus is the address a sync writes into the Service's status: its
// reservation's, adopted, or the user's own.
func (p *eipPlanner) addStatus(name, ip string) {
	if p.reserved(ip) {
		p.add(eipChange{Action: ActionAdopt, Service: name, Address: ip, Reason: "a reservation carries the Service's tags (made by this CCM or by upstream's); the Service's status gets its address"})
	} else {
		p.add(eipChange{Action: actionAssign, Service: name, Address: ip, Reason: "spec.loadBalancerIP is the user's own address; the Service's status gets it"})
	}
}

func (p *eipPlanner) add(e eipChange) { p.res.EIPs = append(p.res.EIPs, e) }

// placement compares an existing reservation of the Service's with where
// the placement policy would put it now.
func (p *eipPlanner) placement(ctx context.Context, s *v1.Service, ip string) {
	r := p.reservationAt(ip)
	if r == nil || !slices.Contains(r.Tags, eip.UsageTag) {
		return // none yet, or the user's own address
	}
	fam := v1.IPv4Protocol
	if a, err := netip.ParseAddr(ip); err == nil && !a.Unmap().Is4() {
		fam = v1.IPv6Protocol
	}
	loc, err := p.placer.Place(ctx, s, fam)
	if err != nil {
		return // a refusal shows among the EIPs when it matters (new Services)
	}
	if from := locationOf(r, loc); from != strings.ToLower(loc.String()) {
		p.res.Placement = append(p.res.Placement, placement{Service: id(s), Address: ip, From: from, To: loc.String()})
	}
}

// locationOf says where r is, in the terms of want (metro or facility).
func locationOf(r *metalv1.IPReservation, want location.Location) string {
	if want.Facility != "" {
		return location.Location{Facility: strings.ToLower(facilityCode(r))}.String()
	}
	m := r.GetMetro()
	return location.Location{Metro: strings.ToLower(m.GetCode())}.String()
}

func (p *eipPlanner) reservationAt(ip string) *metalv1.IPReservation {
	if ip == "" {
		return nil
	}
	for i := range p.all {
		if p.all[i].GetAddress() == ip {
			return &p.all[i]
		}
	}
	return nil
}

func (p *eipPlanner) reserved(ip string) bool { return p.reservationAt(ip) != nil }

func (p *eipPlanner) address(id string) string {
	for _, r := range p.all {
		if r.GetId() == id {
			return r.GetAddress()
		}
	}
	return id
}

func facilityCode(r *metalv1.IPReservation) string {
	f := r.GetFacility()
	return f.GetCode()
}
