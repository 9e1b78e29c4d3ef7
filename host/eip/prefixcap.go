package eip

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

// reasonPrefixLimit: a new Elastic IP was refused because every BGP node
// already announces bgpMaxPrefixes Service addresses
// (bgpMaxPrefixesAction=refuse).
const reasonPrefixLimit = "ElasticIPRefusedPrefixLimit"

// PrefixCap refuses a new Elastic IP once the BGP nodes of its metro
// announce Limit Service addresses (upstream issue #457). Equinix Metal's router drops a
// BGP session that announces more prefixes than the project's limit, and
// with it every Service address of the node; refusing the one address too
// many costs one Service its address instead. Only a new reservation is
// refused: adopting a Service's own, sharing a key's, or a user's own
// spec.loadBalancerIP announces nothing new (or is the user's choice).
type PrefixCap struct {
	// Limit is bgpMaxPrefixes.
	Limit int
	// Announced are the distinct addresses that the given Services make
	// BGP nodes announce, each with the metro of its reservation ("" when
	// unknown: every BGP node announces it): those of the load-balancer
	// module's input (lbsnapshot), which the BGPPrefixLimitExceeded
	// warning counts per node too. An Elastic IP is announced only in its
	// metro, so a new one in metro M counts M's and the unknown ones.
	Announced func(services []*v1.Service) map[string]string
}

// SetPrefixCap turns the cap on; without it, new Elastic IPs are reserved
// whatever the count (bgpMaxPrefixesAction=warn).
func (m *Manager) SetPrefixCap(c PrefixCap) { m.prefixCap = &c }

// underPrefixCap returns an error, with a Warning on the Service, when a new
// Elastic IP in loc would take the BGP nodes of its metro past the cap (a
// location without a metro counts every address). Called with capMu held
// until the reservation is made, so that Services synced at once are
// counted one after the other.
func (m *Manager) underPrefixCap(ctx context.Context, svc *v1.Service, loc location.Location) error {
	services, err := m.listServices(ctx)
	if err != nil {
		return m.fail(svc, fmt.Errorf("counting the Service addresses BGP announces (bgpMaxPrefixesAction=refuse): %w", err))
	}
	n, err := m.comingPrefixes(ctx, services, loc.Metro)
	if err != nil {
		return m.fail(svc, fmt.Errorf("counting the Service addresses BGP announces (bgpMaxPrefixesAction=refuse): %w", err))
	}
	if n < m.prefixCap.Limit {
		return nil
	}
	nodes := "the BGP nodes"
	if loc.Metro != "" {
		nodes += " in metro " + loc.Metro
	}
	msg := fmt.Sprintf("No Elastic IP reserved: %s already announce %d Service addresses and bgpMaxPrefixes %d is the limit (bgpMaxPrefixesAction=refuse); one more would make Equinix Metal drop every BGP session of the nodes. Ask Equinix to raise the project's max prefix and then raise bgpMaxPrefixes, or delete LoadBalancer Services; the Service gets its address at a later retry once there is room",
		nodes, n, m.prefixCap.Limit)
	m.recorder.Eventf(svc, v1.EventTypeWarning, reasonPrefixLimit, "%s", msg)
	return errors.New(msg)
}

// comingPrefixes counts the addresses of m's family the BGP nodes of metro
// announce now (those reserved there and those of unknown location; metro
// "" counts all), plus the reservations of live Services they will
// announce soon: one just made whose Service's address the informer has
// not seen yet, or one pending Equinix's approval (counted by its ID, as
// it has no address yet). Without them, Services synced in a burst would
// all pass the count. One family only (m.api, a view, lists that family's
// reservations): a node's IPv4 and IPv6 sessions are separate, each with
// the limit of its own.
func (m *Manager) comingPrefixes(ctx context.Context, services []*v1.Service, metro string) (int, error) {
	in := func(at string) bool { return metro == "" || at == "" || at == metro }
	prefixes := map[string]bool{}
	fam := m.placeFamily()
	for a, at := range m.prefixCap.Announced(services) {
		if in(at) && familyOf(a) == fam {
			prefixes[a] = true
		}
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
		if at := r.GetMetro(); !in(at.GetCode()) {
			continue // announced in another metro
		}
		if pending(&r) {
			prefixes["pending:"+r.GetId()] = true
		} else {
			prefixes[r.GetAddress()] = true
		}
	}
	return len(prefixes), nil
}
