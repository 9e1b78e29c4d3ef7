package eip

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// The rules of a shared Elastic IP, pure: which Services of a sharing key
// compete for the address (keyGroup), which of them may have it (group),
// and which keep the key's reservation when one lets go (keepersOf). Who
// may have it is MetalLB's own rule (its allocator's, which is
// stricter than its documentation): Services may share an address when they
// have the same sharing key, no port+protocol in common, and the same
// "backend key" — empty for externalTrafficPolicy Cluster, the pod selector
// for Local — so Cluster and Local never mix, and Local Services share only
// with the same selector. The CCM refuses what MetalLB would refuse, with an
// Event naming the other Service, instead of handing out an address MetalLB
// then leaves unannounced for one of them.

// refusal says why a Service may not have its key's address.
type refusal struct {
	// Service and Other are "<namespace>/<name>": the refused Service and
	// the one in its way.
	Service, Other string
	// Reason completes "… cannot share …: <Reason>".
	Reason string
}

func (r refusal) Error() string {
	return fmt.Sprintf("Service %s cannot share its Elastic IP with %s (same sharing key): %s", r.Service, r.Other, r.Reason)
}

// Clash is why a and b, of one sharing key, cannot share an address, or ""
// when they can.
func Clash(a, b *v1.Service) string {
	if ka, kb := backendKey(a), backendKey(b); ka != kb {
		pa, pb := policy(a), policy(b)
		if pa != pb {
			return fmt.Sprintf("externalTrafficPolicy differs (%s has %s, %s has %s); give both the same policy", id(a), pa, id(b), pb)
		}
		return fmt.Sprintf("both have externalTrafficPolicy Local but different selectors (%s has %q, %s has %q); Local Services share an address only when they select the same pods", id(a), ka, id(b), kb)
	}
	for _, p := range a.Spec.Ports {
		for _, q := range b.Spec.Ports {
			if p.Port == q.Port && protocol(p) == protocol(q) {
				return fmt.Sprintf("both use port %s/%d; give one of them another port or another sharing key", protocol(p), p.Port)
			}
		}
	}
	return ""
}

// keyGroup is svc and the other Services of the key that would share addr:
// load balancers of this provider (lbsnapshot.WantsLoadBalancer), not being
// deleted, and not bringing another address of their own.
func keyGroup(all []*v1.Service, svc *v1.Service, key, addr string) []*v1.Service {
	group := []*v1.Service{svc}
	for _, s := range all {
		if s.UID == svc.UID || s.DeletionTimestamp != nil || !lbsnapshot.WantsLoadBalancer(s) || lbsnapshot.SharingKey(s) != key {
			continue
		}
		if ip := s.Spec.LoadBalancerIP; ip != "" && !writtenByCCM(s) && ip != addr {
			continue
		}
		group = append(group, s)
	}
	return group
}

// group decides which Services of one sharing key get its address. Those
// that already have it (address among their status ingress) come first,
// then the older, then by namespace and name, so that a newcomer never
// takes the address from a Service that has it; each is admitted unless it
// clashes with one admitted before it. address may be "" (no reservation
// yet). The input is not modified.
func group(services []*v1.Service, address string) (admitted []*v1.Service, refused []refusal) {
	sorted := slices.Clone(services)
	slices.SortStableFunc(sorted, func(a, b *v1.Service) int {
		if ha, hb := holds(a, address), holds(b, address); ha != hb {
			if ha {
				return -1
			}
			return 1
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(id(a), id(b))
	})
next:
	for _, s := range sorted {
		for _, in := range admitted {
			if why := Clash(in, s); why != "" {
				refused = append(refused, refusal{Service: id(s), Other: id(in), Reason: why})
				continue next
			}
		}
		admitted = append(admitted, s)
	}
	return admitted, refused
}

// keepersOf are the Services, other than the one with UID self and those
// being deleted, that own the reservations with the owner tag tag, sorted.
func keepersOf(services []*v1.Service, tag string, self types.UID) []string {
	var out []string
	for _, s := range services {
		if s.UID != self && s.DeletionTimestamp == nil && slices.Contains(ownerTags(s), tag) {
			out = append(out, id(s))
		}
	}
	slices.Sort(out)
	return out
}

// holds reports whether the Service's status already has address.
func holds(s *v1.Service, address string) bool {
	if address == "" {
		return false
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP == address {
			return true
		}
	}
	return false
}

// backendKey is MetalLB's: the selector for Local, empty for Cluster.
func backendKey(s *v1.Service) string {
	if s.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
		return labels.Set(s.Spec.Selector).String()
	}
	return ""
}

func policy(s *v1.Service) v1.ServiceExternalTrafficPolicy {
	if s.Spec.ExternalTrafficPolicy == "" {
		return v1.ServiceExternalTrafficPolicyCluster
	}
	return s.Spec.ExternalTrafficPolicy
}

// protocol defaults to TCP, as the API server does.
func protocol(p v1.ServicePort) v1.Protocol {
	if p.Protocol == "" {
		return v1.ProtocolTCP
	}
	return p.Protocol
}

func id(s *v1.Service) string { return s.Namespace + "/" + s.Name }
