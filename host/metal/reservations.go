// The reservation cache: what it holds, its indexes, the listing that
// fills it, and the lookups it answers without an API call. The create
// (reserve.go) and the single calls (ipcalls.go) read and update it.

package metal

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"k8s.io/client-go/tools/cache"
)

const (
	indexTag        = "tag"
	indexAssignment = "assignment"
	indexAddress    = "address"
	// indexBlock holds the Elastic IP blocks larger than one address (a
	// /32, or a /128 for IPv6) under one key (blockKey): an address inside
	// one is found by a scan of those few, not of every reservation
	// (ReservationHolding).
	indexBlock = "block"
	blockKey   = "block"
)

// reservationTypes are the kinds of reservation cached: Service and
// control-plane Elastic IPs are public IPv4, a Service's IPv6 address a
// public IPv6 /128. The listing is one call either way (a type filter), so
// a cluster without IPv6 Services makes the calls it made before IPv6.
var reservationTypes = []metalv1.FindIPReservationsTypesParameterInner{
	metalv1.FINDIPRESERVATIONSTYPESPARAMETERINNER_PUBLIC_IPV4,
	metalv1.FINDIPRESERVATIONSTYPESPARAMETERINNER_PUBLIC_IPV6,
}

func newReservationStore() *store {
	return newStore(cacheReservations, idKey, cache.Indexers{
		indexTag: func(obj any) ([]string, error) {
			return obj.(*resv).tags, nil
		},
		indexAssignment: func(obj any) ([]string, error) {
			r := obj.(*resv)
			ids := make([]string, 0, len(r.assignments))
			for _, a := range r.assignments {
				if a.id != "" {
					ids = append(ids, a.id)
				}
			}
			return ids, nil
		},
		indexAddress: func(obj any) ([]string, error) {
			r := obj.(*resv)
			var keys []string
			for _, a := range []string{r.address, r.network} {
				if a != "" && !slices.Contains(keys, a) {
					keys = append(keys, a)
				}
			}
			return keys, nil
		},
		indexBlock: func(obj any) ([]string, error) {
			r := obj.(*resv)
			if !r.flags.has(isManagement) && r.cidr > 0 && r.cidr < r.hostBits() {
				return []string{blockKey}, nil
			}
			return nil, nil
		},
	}, indexTag)
}

// ReservationsWithTags returns, from the cache, every public IPv4 or IPv6
// reservation that carries all the given tags (and maybe others), oldest
// first; OfFamily keeps one family's. The first call fills the cache with a
// full listing; later ones make no API call. The results include
// assignments; they are the caller's.
func (c *Client) ReservationsWithTags(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error) {
	if len(tags) == 0 {
		return nil, errors.New("find IP reservations by tags: no tags given")
	}
	if err := c.loadReservations(ctx); err != nil {
		return nil, err
	}
	return c.reservationsWithTags(tags), nil
}

// loadReservations fills the reservation cache with a full listing on its
// first use and counts the lookup: a miss when it had to list, a hit when
// the cache answers (as equinix_metal_cache_requests_total documents).
func (c *Client) loadReservations(ctx context.Context) error {
	if c.reservations.isLoaded() {
		cacheHit(cacheReservations)
		return nil
	}
	cacheMiss(cacheReservations)
	return c.reservations.refresh(ctx, 0, refreshTimeout, c.listAllReservations)
}

// ReservationsWithTagsFresh is ReservationsWithTags from a listing that
// started after this call (shared with concurrent callers, and updating the
// cache). Use it where acting on stale data does harm, e.g. before moving
// the control-plane EIP.
func (c *Client) ReservationsWithTagsFresh(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error) {
	if len(tags) == 0 {
		return nil, errors.New("find IP reservations by tags: no tags given")
	}
	cacheMiss(cacheReservations)
	if err := c.RefreshReservations(ctx); err != nil {
		return nil, err
	}
	return c.reservationsWithTags(tags), nil
}

// reservationsWithTags looks up the tag index: it starts from the tag that
// the fewest reservations carry (usually the per-Service one) and keeps
// those that carry every other tag.
func (c *Client) reservationsWithTags(tags []string) []metalv1.IPReservation {
	rarest, fewest := "", -1
	for _, t := range tags {
		n := c.reservations.count(indexTag, t)
		if n == 0 {
			return nil // nothing carries this tag, so nothing carries them all
		}
		if fewest < 0 || n < fewest {
			rarest, fewest = t, n
		}
	}
	objs, _ := c.reservations.idx.ByIndex(indexTag, rarest)
	var out []metalv1.IPReservation
	for _, o := range objs {
		r := o.(*resv)
		if hasAllTags(r.tags, tags) {
			out = append(out, r.toSDK())
		}
	}
	SortReservations(out)
	return out
}

func hasAllTags(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// Reservations returns every reservation in the cache (public IPv4 and
// IPv6), oldest first, filling it with a full listing on first use.
func (c *Client) Reservations(ctx context.Context) ([]metalv1.IPReservation, error) {
	if err := c.loadReservations(ctx); err != nil {
		return nil, err
	}
	objs := c.reservations.idx.List()
	out := make([]metalv1.IPReservation, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*resv).toSDK())
	}
	SortReservations(out)
	return out, nil
}

// ReservationHolding returns, from the cache, the project's public IPv4 or
// IPv6 Elastic IP reservation that holds addr: its /32 or /128, or a
// larger block of the project that contains it; nil when the project holds
// no such reservation (or addr is no address). A device's management
// addresses are reservations too, but no Elastic IP, and never match. Like
// ReservationsWithTags, the first call fills the cache; later ones make no
// API call.
func (c *Client) ReservationHolding(ctx context.Context, addr string) (*metalv1.IPReservation, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, nil
	}
	a = a.Unmap()
	if err := c.loadReservations(ctx); err != nil {
		return nil, err
	}
	r := c.holding(a)
	if r == nil {
		// A reservation made after the last listing (the user reserved
		// the address, then created the Service) would be refused until
		// the next full refresh: a miss lists again, at most once per
		// holdingMissRelist, so repeated misses cost no more than that.
		if fresh, after := c.reservations.listingFor(holdingMissRelist); !fresh {
			if err := c.reservations.refresh(ctx, after, refreshTimeout, c.listAllReservations); err != nil {
				return nil, err
			}
			r = c.holding(a)
		}
	}
	return r, nil
}

// holdingMissRelist is how old the cache's listing must be before a lookup
// that finds no reservation holding an address lists again.
const holdingMissRelist = 30 * time.Second

// holding is the reservation of the cache that holds a, nil when none.
func (c *Client) holding(a netip.Addr) *metalv1.IPReservation {
	// The address itself (a /32 or /128, or the first of a block) is one
	// index lookup; an address inside a block is one scan of the blocks.
	exact, _ := c.reservations.idx.ByIndex(indexAddress, a.String())
	blocks, _ := c.reservations.idx.ByIndex(indexBlock, blockKey)
	var found []metalv1.IPReservation
	for _, o := range append(exact, blocks...) {
		r := o.(*resv).toSDK()
		if holds(&r, a) && !slices.ContainsFunc(found, func(f metalv1.IPReservation) bool { return f.GetId() == r.GetId() }) {
			found = append(found, r)
		}
	}
	if len(found) == 0 {
		return nil
	}
	SortReservations(found)
	return &found[0]
}

// holds reports whether r, an Elastic IP (not a management block), covers a.
func holds(r *metalv1.IPReservation, a netip.Addr) bool {
	if r.GetManagement() {
		return false
	}
	network := r.GetNetwork()
	if network == "" {
		network = r.GetAddress()
	}
	n, err := netip.ParseAddr(network)
	if err != nil {
		return false
	}
	n = n.Unmap()
	bits := int(r.GetCidr())
	if bits == 0 {
		bits = n.BitLen()
	}
	p, err := n.Prefix(bits)
	return err == nil && p.Contains(a)
}

// RefreshReservations re-reads every reservation of the project the cache
// keeps (public IPv4 and IPv6: see cached; all pages, with assignments),
// replacing the cache. It returns after a listing that started after the
// call, so it is also a "fresh read".
func (c *Client) RefreshReservations(ctx context.Context) error {
	return c.reservations.refresh(ctx, c.reservations.ticket(), refreshTimeout, c.listAllReservations)
}

func (c *Client) listAllReservations(ctx context.Context) ([]any, error) {
	// Each page is compacted as it arrives: the SDK's structs of one page
	// at a time, never of the whole listing, are alive.
	items, err := listPages(ctx, func(ctx context.Context, page int32) ([]*resv, *metalv1.Meta, error) {
		ctx, cancel := c.call(ctx, opListIPs)
		defer cancel()
		ctx = withTrim(ctx, trimReservationList)
		list, resp, err := c.api.IPAddressesApi.FindIPReservations(ctx, c.opts.ProjectID).
			Types(reservationTypes).
			Include([]string{"assignments"}).
			Page(page).PerPage(int32(c.opts.PageSize)).Execute()
		if err != nil {
			return nil, nil, c.red.apiError(opListIPs, resp, err)
		}
		// One entry per item, nil for those not cached, so that listPages
		// compares the count with the listing's total.
		out := make([]*resv, len(list.IpAddresses))
		for i, it := range list.IpAddresses {
			// An item that does not decode as IPReservation (a VRF
			// reservation, or one with fields this SDK does not know) has
			// a nil IPReservation; upstream dereferenced it and crashed.
			if r := it.IPReservation; r != nil && r.GetId() != "" && cached(r) {
				out[i] = compactReservation(r)
			}
		}
		return out, list.Meta, nil
	})
	if err != nil {
		return nil, err
	}
	objs := make([]any, 0, len(items))
	for _, r := range items {
		if r != nil {
			objs = append(objs, r)
		}
	}
	return objs, nil
}

// cached says whether r is kept in the reservation cache: every public
// IPv4 reservation (a device's management blocks too, which the lookups
// never match), and the public IPv6 ones that are not a device's
// management block: the project's /56 per metro is no Elastic IP, and
// nothing the CCM does reads it.
func cached(r *metalv1.IPReservation) bool {
	switch r.GetType() {
	case metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4:
		return true
	case metalv1.IPRESERVATIONTYPE_PUBLIC_IPV6:
		return !r.GetManagement()
	}
	return false
}

// SortReservations orders oldest first (then by ID), so that the original
// of a set of duplicates comes first and answers are deterministic. It is
// the one order of reservations: the client's lookups and the EIP
// lifecycle's choice among duplicates both use it.
func SortReservations(rs []metalv1.IPReservation) {
	sort.SliceStable(rs, func(i, j int) bool {
		ti, tj := rs[i].GetCreatedAt(), rs[j].GetCreatedAt()
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return rs[i].GetId() < rs[j].GetId()
	})
}

// OfFamily keeps the reservations of rs whose address family is fam (4 or
// 6), in their order; a reservation that does not say is IPv4, as every
// reservation the CCM made before IPv6 was.
func OfFamily(rs []metalv1.IPReservation, fam int32) []metalv1.IPReservation {
	out := rs[:0:0]
	for _, r := range rs {
		if ReservationFamily(&r) == fam {
			out = append(out, r)
		}
	}
	return out
}

// ReservationFamily is r's address family, 4 or 6.
func ReservationFamily(r *metalv1.IPReservation) int32 {
	if r.GetAddressFamily() == 6 || r.GetType() == metalv1.IPRESERVATIONTYPE_PUBLIC_IPV6 {
		return 6
	}
	return 4
}
