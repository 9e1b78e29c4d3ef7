package faults

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// World is what the invariants are checked against: the cluster's
// Services, the Equinix project's reservations tagged for this cluster,
// and the MetalLB objects in the cluster.
type World struct {
	// Services by namespace/name: the live LoadBalancer Services.
	Services map[string]Service
	// Reservations tagged for this cluster by the CCM.
	Reservations []Reservation
	// Pools are the IPAddressPools by name; Advertised are the pool names
	// the CCM's BGPAdvertisements list.
	Pools      map[string][]string
	Advertised []string
}

// Service is one Service as the check sees it.
type Service struct {
	Terminating bool     // deleted, its finalizer not yet removed
	Ingress     []string // status.loadBalancer.ingress IPs
}

// Reservation is one Elastic IP reservation.
type Reservation struct {
	ID, Address string
	Service     string // namespace/name its tag names
}

// Problems lists every broken invariant, sorted; empty when the world is
// converged:
//   - no leaked reservation: each belongs to a live Service;
//   - no duplicate: never two reservations for one Service;
//   - every Service converged: not terminating, its ingress set and equal
//     to its reservation's address;
//   - no stale MetalLB object: every pool address is a live Service's
//     ingress, every live address is in a pool, and the advertisement
//     lists exactly the pools that exist.
func (w World) Problems() []string {
	var out []string
	bySvc := map[string][]Reservation{}
	for _, r := range w.Reservations {
		bySvc[r.Service] = append(bySvc[r.Service], r)
		if s, ok := w.Services[r.Service]; !ok || s.Terminating {
			out = append(out, fmt.Sprintf("leaked reservation %s (%s) of deleted Service %s", r.ID, r.Address, r.Service))
		}
	}
	for name, rs := range bySvc {
		if len(rs) > 1 {
			out = append(out, fmt.Sprintf("duplicate: %d reservations for Service %s", len(rs), name))
		}
	}
	live := map[string]bool{}
	for name, s := range w.Services {
		if s.Terminating {
			out = append(out, fmt.Sprintf("Service %s still terminating", name))
			continue
		}
		rs := bySvc[name]
		switch {
		case len(s.Ingress) == 0:
			out = append(out, fmt.Sprintf("Service %s has no ingress", name))
		case len(rs) == 0:
			out = append(out, fmt.Sprintf("Service %s has ingress %v but no reservation", name, s.Ingress))
		case len(s.Ingress) != 1 || s.Ingress[0] != rs[0].Address:
			out = append(out, fmt.Sprintf("Service %s has ingress %v, its reservation %s", name, s.Ingress, rs[0].Address))
		}
		for _, ip := range s.Ingress {
			live[ip] = true
		}
	}
	out = append(out, w.metalLBProblems(live)...)
	sort.Strings(out)
	return out
}

func (w World) metalLBProblems(live map[string]bool) []string {
	var out []string
	pooled := map[string]bool{}
	for name, addrs := range w.Pools {
		for _, a := range addrs {
			ip := a
			if p, err := netip.ParsePrefix(a); err == nil {
				ip = p.Addr().String()
			}
			pooled[ip] = true
			if !live[ip] {
				out = append(out, fmt.Sprintf("stale IPAddressPool %s: %s is no live Service's address", name, a))
			}
		}
		if !slices.Contains(w.Advertised, name) {
			out = append(out, fmt.Sprintf("IPAddressPool %s is not advertised", name))
		}
	}
	for ip := range live {
		if !pooled[ip] {
			out = append(out, fmt.Sprintf("address %s of a live Service is in no IPAddressPool", ip))
		}
	}
	for _, name := range w.Advertised {
		if _, ok := w.Pools[name]; !ok {
			out = append(out, fmt.Sprintf("stale BGPAdvertisement entry: pool %s does not exist", name))
		}
	}
	return out
}

// Summary is Problems on one line, at most n of them.
func Summary(problems []string, n int) string {
	if len(problems) <= n {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(problems[:n], "; "), len(problems)-n)
}
