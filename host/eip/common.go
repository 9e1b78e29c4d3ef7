package eip

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// The low-level helpers that the steps of Ensure (ensure.go, sharing.go)
// share with Release (release.go) and Current (current.go); the ones only
// Ensure's trip uses are in ensure.go, where the trip meets them. Here:
// the view of the Manager for one IP family, whether a reservation is
// still pending, the lookups of the cluster's Services, and the
// cluster-wide error.

// metalFamily is the Equinix address family of fam: 4 or 6.
func metalFamily(fam v1.IPFamily) int32 {
	if fam == v1.IPv6Protocol {
		return 6
	}
	return 4
}

// view is m for one address family: every lookup by tags sees that
// family's reservations only, a new reservation is of that family, and
// only the IPv4 view writes spec.loadBalancerIP (one field, which load
// balancers written for upstream read as the IPv4 Elastic IP). A
// Service's IPv4 and IPv6 reservations carry the same tags: the family,
// which every reservation has, tells them apart, so an IPv4 reservation
// made before IPv6 is found by the same lookup as ever.
func (m *Manager) view(fam v1.IPFamily) *Manager {
	v := *m
	v.api = familyAPI{api: m.api, fam: metalFamily(fam)}
	v.family = fam
	if fam == v1.IPv6Protocol {
		v.placer = ipv6Placer{m.placer}
	}
	return &v
}

// placeFamily is the family the placement policy is asked about: m's, or
// IPv4 for the Manager itself.
func (m *Manager) placeFamily() v1.IPFamily {
	if m.family == "" {
		return v1.IPv4Protocol
	}
	return m.family
}

// ipv6Placer makes a placement policy's refusal of an IPv6 Elastic IP a
// noIPv6: a policy may deny IPv6 where the project has none, and a
// PreferDualStack Service then gets IPv4 as when Equinix refuses. A
// policy that cannot be evaluated at all stays a cluster-wide failure.
type ipv6Placer struct{ Placer }

func (p ipv6Placer) Place(ctx context.Context, svc *v1.Service, fam v1.IPFamily) (location.Location, error) {
	loc, err := p.Placer.Place(ctx, svc, fam)
	if err != nil && !isClusterWide(err) {
		return loc, &noIPv6{err: err}
	}
	return loc, err
}

// familyAPI filters api to one address family.
type familyAPI struct {
	api
	fam int32
}

func (f familyAPI) ReservationsWithTags(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error) {
	rs, err := f.api.ReservationsWithTags(ctx, tags...)
	return metal.OfFamily(rs, f.fam), err
}

func (f familyAPI) RequestReservation(ctx context.Context, r metal.ReservationRequest) (*metalv1.IPReservation, error) {
	r.IPv6 = f.fam == 6
	return f.api.RequestReservation(ctx, r)
}

func (f familyAPI) ReservationHolding(ctx context.Context, addr string) (*metalv1.IPReservation, error) {
	r, err := f.api.ReservationHolding(ctx, addr)
	if r != nil && metal.ReservationFamily(r) != f.fam {
		return nil, err
	}
	return r, err
}

// NeedsIPv6 says whether any of svcs, load-balanced by this CCM, has the
// IPv6 family: whether BGP nodes need their IPv6 sessions (plan's rule;
// the running CCM turns them on at the first IPv6 address it gives).
func NeedsIPv6(svcs []*v1.Service) bool {
	return slices.ContainsFunc(svcs, func(s *v1.Service) bool {
		return lbsnapshot.WantsLoadBalancer(s) && slices.Contains(families(s), v1.IPv6Protocol)
	})
}

// invalidIPRetry is how long the service controller waits before trying a
// Service with an unusable spec.loadBalancerIP again. Retrying cannot fix
// it; editing the Service can, and an edit is synced at once whatever this
// says. Long, so that a broken Service costs no API calls and no Event storm.
var invalidIPRetry = time.Hour

func pending(r *metalv1.IPReservation) bool {
	return r.GetState() == "pending" || r.GetAddress() == ""
}

// listServices are the cluster's Services from the informer, or from the
// API server without one.
func (m *Manager) listServices(ctx context.Context) ([]*v1.Service, error) {
	if m.services.List == nil {
		return m.liveServices(ctx)
	}
	if m.services.Synced != nil && !m.services.Synced() {
		return nil, fmt.Errorf("the CCM is still reading the cluster's Services (needed to share an Elastic IP); the Service is retried")
	}
	return m.services.List()
}

// liveServices lists every Service from the API server, a page at a time.
func (m *Manager) liveServices(ctx context.Context) ([]*v1.Service, error) {
	var out []*v1.Service
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := m.kube.CoreV1().Services("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// ClusterWideError is a failure that concerns every Service alike (the
// placement policy cannot be evaluated at all). Whoever returns it has
// reported it once for the cluster (host/clusterevent), so Ensure records
// no Event on the Service: with 10,000 Services, one per Service and retry
// would bury everything else.
type ClusterWideError struct{ Err error }

func (e *ClusterWideError) Error() string { return e.Err.Error() }

func (e *ClusterWideError) Unwrap() error { return e.Err }

func isClusterWide(err error) bool {
	var cw *ClusterWideError
	return errors.As(err, &cw)
}
