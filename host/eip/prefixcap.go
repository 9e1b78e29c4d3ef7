package eip

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// reasonPrefixLimit: a new Elastic IP was refused because every BGP node
// already announces bgpMaxPrefixes Service addresses
// (bgpMaxPrefixesAction=refuse).
const reasonPrefixLimit = "ElasticIPRefusedPrefixLimit"

// PrefixCap refuses a new Elastic IP once the BGP nodes announce Limit
// Service addresses (upstream issue #457). Equinix Metal's router drops a
// BGP session that announces more prefixes than the project's limit, and
// with it every Service address of the node; refusing the one address too
// many costs one Service its address instead. Only a new reservation is
// refused: adopting a Service's own, sharing a key's, or a user's own
// spec.loadBalancerIP announces nothing new (or is the user's choice).
type PrefixCap struct {
	// Limit is bgpMaxPrefixes.
	Limit int
	// Announced are the distinct addresses that the given Services make
	// every BGP node announce: those of the load-balancer module's input
	// (lbsnapshot), which the BGPPrefixLimitExceeded warning counts too.
	Announced func(services []*v1.Service) map[string]bool
}

// SetPrefixCap turns the cap on; without it, new Elastic IPs are reserved
// whatever the count (bgpMaxPrefixesAction=warn).
func (m *Manager) SetPrefixCap(c PrefixCap) { m.prefixCap = &c }

// underPrefixCap returns an error, with a Warning on the Service, when a new
// Elastic IP would take the BGP nodes past the cap. Called with capMu held
// until the reservation is made, so that Services synced at once are
// counted one after the other.
func (m *Manager) underPrefixCap(ctx context.Context, svc *v1.Service) error {
	services, err := m.listServices(ctx)
	if err != nil {
		return m.fail(svc, fmt.Errorf("counting the Service addresses BGP announces (bgpMaxPrefixesAction=refuse): %w", err))
	}
	n, err := m.comingPrefixes(ctx, services)
	if err != nil {
		return m.fail(svc, fmt.Errorf("counting the Service addresses BGP announces (bgpMaxPrefixesAction=refuse): %w", err))
	}
	if n < m.prefixCap.Limit {
		return nil
	}
	msg := fmt.Sprintf("No Elastic IP reserved: the BGP nodes already announce %d Service addresses and bgpMaxPrefixes %d is the limit (bgpMaxPrefixesAction=refuse); one more would make Equinix Metal drop every BGP session of the nodes. Ask Equinix to raise the project's max prefix and then raise bgpMaxPrefixes, or delete LoadBalancer Services; the Service gets its address at a later retry once there is room",
		n, m.prefixCap.Limit)
	m.recorder.Eventf(svc, v1.EventTypeWarning, reasonPrefixLimit, "%s", msg)
	return errors.New(msg)
}

// comingPrefixes counts the addresses the BGP nodes announce now, plus the
// reservations of live Services they will announce soon: one just made
// whose Service's address the informer has not seen yet, or one pending
// Equinix's approval (counted by its ID, as it has no address yet).
// Without them, Services synced in a burst would all pass the count.
func (m *Manager) comingPrefixes(ctx context.Context, services []*v1.Service) (int, error) {
	prefixes := map[string]bool{}
	for a := range m.prefixCap.Announced(services) {
		prefixes[a] = true
	}
	all, err := m.api.ReservationsWithTags(ctx, UsageTag, ClusterTag(m.clusterID))
	if err != nil {
		return 0, err
	}
	live := ownerTagSet(services)
	for _, r := range all {
		if owner := OwnerTag(r.Tags); owner == "" || !live[owner] {
			continue // not a Service's (an orphan is announced by nobody)
		}
		if pending(&r) {
			prefixes["pending:"+r.GetId()] = true
		} else {
			prefixes[r.GetAddress()] = true
		}
	}
	return len(prefixes), nil
}
