package eip

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// ensureShared, one family's address of a Service with a sharing key, sits
// beside the pure rules it applies (keyGroup, group, Clash), so that a
// reader of the step has its rules at hand; the steps it shares with
// ensureOwn are in ensure.go, the release of a key's reservation
// (releaseShared) in release.go.

// ensureShared is Ensure for a Service with a sharing key: the key's one
// reservation (tags SharedTags), reserved by the first Service of the key
// where placement puts it.
//
// Everything for one key runs under the key's lock, in this process (the
// leader): two Services of one key synced at once make one reservation
// (RequestReservation would also find the first one by its tags), and a
// release never races a newcomer. A Service that does not hold the address
// yet is admitted only if it does not clash with the Services that do
// (group: MetalLB's rule), and if placement puts it where the reservation
// is; otherwise it gets an ElasticIPShareRefused Event naming the other
// Service and an error, and the service controller retries it with backoff
// (so it gets the address once the Service in its way is gone or changed).
//
// A spec.loadBalancerIP the user set wins over the key: the Service brings
// its own address and the key only tells MetalLB which Services may share
// it, as before this CCM shared anything.
func (m *Manager) ensureShared(ctx context.Context, svc *v1.Service, key string) (string, error) {
	if lbIP := svc.Spec.LoadBalancerIP; lbIP != "" && !writtenByCCM(svc) {
		return m.ownAddress(ctx, svc, lbIP)
	}
	tags := SharedTags(m.clusterID, key)
	m.keys.LockKey(tags[1])
	defer func() { _ = m.keys.UnlockKey(tags[1]) }()

	found, err := m.api.ReservationsWithTags(ctx, tags...)
	if err != nil {
		return "", m.fail(svc, fmt.Errorf("looking up the Elastic IP of sharing key %q: %w", key, err))
	}
	res := m.pick(svc, found, fmt.Sprintf("the tags of sharing key %q", key))
	addr := ""
	if res != nil {
		addr = res.GetAddress()
	}
	all, err := m.listServices(ctx)
	if err != nil {
		return "", m.fail(svc, err)
	}
	admitted, refused := group(keyGroup(all, svc, key, addr), addr)
	for _, r := range refused {
		if r.Service == id(svc) {
			return "", m.refuse(svc, r.Error()+"; the Service gets the address once that changes")
		}
	}
	if !holds(svc, addr) {
		loc, err := m.placer.Place(ctx, svc, m.placeFamily())
		if err != nil {
			return "", m.fail(svc, err)
		}
		if res == nil {
			if res, err = m.reserve(ctx, svc, loc, tags, key); err != nil {
				return "", err
			}
		} else if where, ok := reservedIn(res, loc); !ok {
			return "", m.refuse(svc, fmt.Sprintf("placement puts Service %s in %s, but the Elastic IP %s of sharing key %q%s is in %s; one key has one address in one place: give the Services of the key the same metro or facility, or this Service another key",
				id(svc), loc, res.GetAddress(), key, others(admitted, svc), where))
		}
	}
	if res, err = m.awaitApproval(ctx, svc, res); err != nil {
		return "", err
	}
	ip := res.GetAddress()
	if lbIP := m.ccmAddress(svc); lbIP != "" && lbIP != ip {
		// The address the CCM gave the Service is no reservation of the
		// cluster any more (not its own, nor another key's it just left):
		// the key's reservation was released outside the CCM.
		if prev, err := m.reservationAt(ctx, lbIP); err == nil && prev == nil {
			m.reportLost(svc, lbIP, ip)
		}
	}
	if err := m.publish(ctx, svc, ip); err != nil {
		return "", err
	}
	// A Service that had an Elastic IP of its own before it took a key
	// needs it no longer.
	return ip, m.releaseOwn(ctx, svc, fmt.Sprintf("; the Service now shares %s (sharing key %q)", ip, key))
}

// refuse reports that the Service may not share its key's address.
func (m *Manager) refuse(svc *v1.Service, msg string) error {
	m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonShareRefused, "%s", msg)
	return fmt.Errorf("%s", msg)
}

// others names the admitted Services other than svc, for a message.
func others(admitted []*v1.Service, svc *v1.Service) string {
	var names []string
	for _, s := range admitted {
		if s.UID != svc.UID {
			names = append(names, id(s))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (used by " + strings.Join(names, ", ") + ")"
}

// The rules of a shared Elastic IP, pure: which Services of a sharing key
// compete for the address (keyGroup) and which of them may have it
// (group); which keep the key's reservation when one lets go is keepersOf,
// beside releaseShared, its one user (release.go). Who may have it is
// MetalLB's own rule (its allocator's, which is
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
