package metal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

const (
	indexTag        = "tag"
	indexAssignment = "assignment"
	indexAddress    = "address"
	// indexBlock holds the Elastic IP blocks larger than a /32 under one
	// key (blockKey): an address inside one is found by a scan of those
	// few, not of every reservation (ReservationHolding).
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

// RefreshReservations re-reads every public IPv4 reservation of the project
// (all pages, with assignments), replacing the cache. It returns after a
// listing that started after the call, so it is also a "fresh read".
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

// ReservationsWithTags returns, from the cache, every public IPv4
// reservation that carries all the given tags (and maybe others), oldest
// first. The first call fills the cache with a full listing; later ones make
// no API call. The results include assignments; they are the caller's.
func (c *Client) ReservationsWithTags(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error) {
	if len(tags) == 0 {
		return nil, errors.New("find IP reservations by tags: no tags given")
	}
	if !c.reservations.isLoaded() {
		cacheMiss(cacheReservations)
		if err := c.reservations.refresh(ctx, 0, refreshTimeout, c.listAllReservations); err != nil {
			return nil, err
		}
	} else {
		cacheHit(cacheReservations)
	}
	return c.reservationsWithTags(tags), nil
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

// Reservations returns every public IPv4 reservation in the cache, oldest
// first, filling it with a full listing on first use.
func (c *Client) Reservations(ctx context.Context) ([]metalv1.IPReservation, error) {
	if !c.reservations.isLoaded() {
		cacheMiss(cacheReservations)
		if err := c.reservations.refresh(ctx, 0, refreshTimeout, c.listAllReservations); err != nil {
			return nil, err
		}
	}
	objs := c.reservations.idx.List()
	out := make([]metalv1.IPReservation, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*resv).toSDK())
	}
	SortReservations(out)
	return out, nil
}

// ReservationHolding returns, from the cache, the project's public IPv4
// Elastic IP reservation that holds addr: its /32 (/128), or a larger
// block of the project that contains it; nil when the project holds no
// such reservation (or addr is no address). A device's management
// addresses are reservations too, but no Elastic IP, and never match. Like
// ReservationsWithTags, the first call fills the cache; later ones make no
// API call.
func (c *Client) ReservationHolding(ctx context.Context, addr string) (*metalv1.IPReservation, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, nil
	}
	a = a.Unmap()
	if !c.reservations.isLoaded() {
		cacheMiss(cacheReservations)
		if err := c.reservations.refresh(ctx, 0, refreshTimeout, c.listAllReservations); err != nil {
			return nil, err
		}
	} else {
		cacheHit(cacheReservations)
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
	// The address itself (a /32, or the first of a block) is one index
	// lookup; an address inside a block is one scan of the blocks.
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

// ProjectID is the project this client works in, for messages.
func (c *Client) ProjectID() string { return c.opts.ProjectID }

func hasAllTags(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
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

// ReservationRequest describes a new public IPv4 /32 reservation (with
// IPv6, a public IPv6 /128), where the placement policy put it. Tags and
// the family identify it: they are what makes a repeated request find the
// reservation instead of creating a second one (a Service's IPv4 and IPv6
// reservations carry the same tags). Details is its description in the
// Equinix console (none when empty).
type ReservationRequest struct {
	location.Location
	Tags    []string
	Details string
	IPv6    bool
}

// Family is the address family of what r asks for: 4 or 6.
func (r ReservationRequest) Family() int32 {
	if r.IPv6 {
		return 6
	}
	return 4
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

// RequestReservation returns the reservation carrying all of r.Tags,
// creating it if there is none.
//
// A new Service costs one POST: the lookup by tags is answered from the
// reservation cache, which holds every reservation of the project as of a
// listing no older than RefreshPeriod plus our own writes since. The
// project is listed again before the lookup only when that is not enough to
// rule out a duplicate:
//
//   - the cache has never been filled (a new process, e.g. after a crash or a
//     leader change: the first listing finds what the previous one made);
//   - an earlier attempt for the same tags ended without knowing whether the
//     API created the reservation (a timeout, a transport error or a 5xx):
//     the attempt then waits for a listing that started after that failure,
//     in this call or a later one, so a lost answer never leads to a second
//     reservation;
//   - the cache's listing is older than RefreshPeriod (Run missed a refresh),
//     so a reservation made by hand in the meantime is seen. The listing
//     already under way, if any, is shared with concurrent callers.
//
// Calls with the same tags are serialised in this process, and a
// reservation we created is in the cache at once. The POST itself is never
// repeated blindly: after a 429, 5xx or transport error the loop starts
// again (re-reading first if the outcome is unknown), with backoff, at most
// Retries more times. A 4xx such as 422 (no IPs left in the metro, approval
// required) is returned at once.
func (c *Client) RequestReservation(ctx context.Context, r ReservationRequest) (*metalv1.IPReservation, error) {
	if len(r.Tags) == 0 {
		return nil, errors.New("request IP reservation: no tags; a reservation without tags cannot be found again and would leak")
	}
	if err := r.Location.Validate(); err != nil {
		return nil, fmt.Errorf("request IP reservation: %w", err)
	}
	key := strings.Join(slices.Sorted(slices.Values(r.Tags)), ",")
	if r.IPv6 {
		key += ";ipv6"
	}
	c.reserveLocks.LockKey(key)
	defer func() { _ = c.reserveLocks.UnlockKey(key) }()

	var (
		result  *metalv1.IPReservation
		lastErr error
	)
	b := wait.Backoff{
		Duration: c.opts.RetryWaitMin,
		Factor:   2,
		Jitter:   0.2,
		Steps:    c.opts.Retries + 1,
		Cap:      c.opts.RetryWaitMax,
	}
	err := wait.ExponentialBackoffWithContext(ctx, b, func(ctx context.Context) (bool, error) {
		if err := c.reservationsBeforeCreate(ctx, key); err != nil {
			return false, err
		}
		if existing := OfFamily(c.reservationsWithTags(r.Tags), r.Family()); len(existing) > 0 {
			if len(existing) > 1 {
				ids := make([]string, 0, len(existing))
				for _, e := range existing {
					ids = append(ids, e.GetId())
				}
				klog.InfoS("Several Equinix Metal IP reservations carry the same tags; using the oldest", "tags", r.Tags, "ids", ids)
			}
			c.setUncertain(key, false)
			result = &existing[0]
			return true, nil
		}
		res, err := c.createReservation(ctx, r)
		if err == nil {
			c.setUncertain(key, false)
			result = res
			return true, nil
		}
		if outcomeUnknown(err) {
			c.setUncertain(key, true)
		}
		if createMayBeRetried(err, c.opts.RetryWaitMax) {
			lastErr = err
			// Honour the server's Retry-After on top of the backoff.
			var ae *callError
			if errors.As(err, &ae) && ae.RetryAfter > 0 {
				t := time.NewTimer(ae.RetryAfter)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return false, ctx.Err()
				case <-t.C:
				}
			}
			return false, nil
		}
		return false, err
	})
	switch {
	case err == nil:
		return result, nil
	case wait.Interrupted(err) && lastErr != nil && ctx.Err() == nil:
		return nil, fmt.Errorf("%w (gave up after %d attempts)", lastErr, b.Steps)
	}
	return nil, err
}

// reservationsBeforeCreate makes the cache good enough to decide that no
// reservation carries the tags of key (see RequestReservation): a listing
// that started after an unknown outcome for key, else any listing younger
// than RefreshPeriod (the running or next one if the cache is older).
func (c *Client) reservationsBeforeCreate(ctx context.Context, key string) error {
	var after uint64
	if c.uncertain(key) {
		after = c.reservations.ticket()
	} else {
		var fresh bool
		if fresh, after = c.reservations.listingFor(c.opts.RefreshPeriod); fresh {
			cacheHit(cacheReservations)
			return nil
		}
	}
	cacheMiss(cacheReservations)
	return c.reservations.refresh(ctx, after, refreshTimeout, c.listAllReservations)
}

// outcomeUnknown says whether a failed POST may nevertheless have created
// its object: no answer, or a 5xx (the server may have failed after the
// write). A 429 or another 4xx is a refusal.
func outcomeUnknown(err error) bool {
	var e *callError
	if !errors.As(err, &e) {
		return false
	}
	return e.StatusCode == 0 || e.StatusCode >= 500
}

// uncertain tells whether a reservation request for this tag set ended
// without knowing whether the API created it.
func (c *Client) uncertain(key string) bool {
	c.uncertainMu.Lock()
	defer c.uncertainMu.Unlock()
	return c.uncertainTags[key]
}

func (c *Client) setUncertain(key string, v bool) {
	c.uncertainMu.Lock()
	defer c.uncertainMu.Unlock()
	if v {
		c.uncertainTags[key] = true
	} else {
		delete(c.uncertainTags, key)
	}
}

// createMayBeRetried says whether a failed POST may be attempted again after
// a fresh lookup by tags: the API was overloaded or unreachable, not
// refusing the request.
func createMayBeRetried(err error, maxWait time.Duration) bool {
	var e *callError
	if !errors.As(err, &e) {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	switch {
	case e.StatusCode == 0:
		return true // transport error or timeout: it may or may not exist now; the re-read decides
	case e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusServiceUnavailable:
		return e.RetryAfter <= maxWait
	case e.StatusCode >= 500 && e.StatusCode != http.StatusNotImplemented:
		return true
	}
	return false
}

func (c *Client) createReservation(ctx context.Context, r ReservationRequest) (*metalv1.IPReservation, error) {
	ctx, cancel := c.call(ctx, opRequestIP)
	defer cancel()
	typ := metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4
	if r.IPv6 {
		typ = metalv1.IPRESERVATIONTYPE_PUBLIC_IPV6
	}
	in := metalv1.IPReservationRequestInput{
		Type:                   string(typ),
		Quantity:               1,
		Tags:                   r.Tags,
		FailOnApprovalRequired: metalv1.PtrBool(true),
	}
	if r.Details != "" {
		in.Details = metalv1.PtrString(r.Details)
	}
	if r.Metro != "" {
		in.Metro = metalv1.PtrString(r.Metro)
	} else {
		in.Facility = metalv1.PtrString(r.Facility)
	}
	out, resp, err := c.api.IPAddressesApi.RequestIPReservation(ctx, c.opts.ProjectID).
		RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&in)).
		Include([]string{"assignments"}).Execute()
	if err != nil {
		return nil, c.red.apiError(opRequestIP, resp, err)
	}
	res := out.IPReservation
	if res == nil || res.GetId() == "" {
		return nil, fmt.Errorf("%s: the API's answer is not a %s reservation", opRequestIP.desc, typ)
	}
	c.reservations.upsert(compactReservation(res))
	return res, nil
}

// Reservation GETs one reservation (with assignments) whatever the cache
// holds, e.g. while waiting for a pending one, and updates the cache (a 404
// removes it and gives an IsNotFound error).
func (c *Client) Reservation(ctx context.Context, id string) (*metalv1.IPReservation, error) {
	if id == "" {
		return nil, errors.New("get IP reservation: empty ID")
	}
	ctx, cancel := c.call(ctx, opGetIP)
	defer cancel()
	out, resp, err := c.api.IPAddressesApi.FindIPAddressById(ctx, id).Include([]string{"assignments"}).Execute()
	if err != nil {
		err = c.red.apiError(opGetIP, resp, err)
		if IsNotFound(err) {
			c.reservations.remove(id)
		}
		return nil, err
	}
	switch {
	case out.IPReservation != nil:
		if cached(out.IPReservation) {
			c.reservations.upsert(compactReservation(out.IPReservation))
		}
		return out.IPReservation, nil
	case out.IPAssignment != nil:
		return nil, fmt.Errorf("%s: %s is an IP assignment, not a reservation", opGetIP.desc, id)
	}
	return nil, fmt.Errorf("%s: %s is neither a public IP reservation nor an assignment", opGetIP.desc, id)
}

// DeleteIP deletes a reservation, or unassigns an assignment, by its ID (the
// API's DELETE /ips/{id} does either). A 404 counts as done. The cache
// forgets the reservation, or the assignment inside its reservation.
// DELETE is idempotent and retried.
func (c *Client) DeleteIP(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("delete IP address: empty ID")
	}
	ctx, cancel := c.call(ctx, opDeleteIP)
	defer cancel()
	resp, err := c.api.IPAddressesApi.DeleteIPAddress(ctx, id).Execute()
	if err = c.red.apiError(opDeleteIP, resp, err); err != nil && !IsNotFound(err) {
		return err
	}
	c.forgetIP(id)
	return nil
}

// forgetIP removes a reservation, or an assignment from its reservation.
func (c *Client) forgetIP(id string) {
	c.editMu.Lock()
	defer c.editMu.Unlock()
	if _, ok, _ := c.reservations.idx.GetByKey(id); ok {
		c.reservations.remove(id)
		return
	}
	devs, _ := c.devices.idx.ByIndex(indexDeviceAssignment, id)
	for _, o := range devs {
		d := *o.(*metalv1.Device)
		d.IpAddresses = slices.DeleteFunc(slices.Clone(d.IpAddresses), func(a metalv1.IPAssignment) bool {
			return a.GetId() == id
		})
		c.devices.upsert(&d)
	}
	objs, _ := c.reservations.idx.ByIndex(indexAssignment, id)
	for _, o := range objs {
		r := *o.(*resv) // a copy: the cached one may be read meanwhile
		r.assignments = slices.DeleteFunc(slices.Clone(r.assignments), func(a assignment) bool { return a.id == id })
		c.reservations.upsert(&r)
	}
}

// AssignIP assigns address (an Elastic IP, e.g. "147.75.1.2" or
// "147.75.1.2/32") to a device. It is a POST and is not retried: the caller
// re-reads the reservation and decides again. The new assignment is added to
// the cached reservation of that address.
func (c *Client) AssignIP(ctx context.Context, deviceID, address string) (*metalv1.IPAssignment, error) {
	if deviceID == "" || address == "" {
		return nil, fmt.Errorf("assign IP address: need a device ID (%q) and an address (%q)", deviceID, address)
	}
	ctx, cancel := c.call(ctx, opAssignIP)
	defer cancel()
	a, resp, err := c.api.DevicesApi.CreateIPAssignment(ctx, deviceID).
		IPAssignmentInput(metalv1.IPAssignmentInput{Address: address}).Execute()
	if err != nil {
		return nil, c.red.apiError(opAssignIP, resp, err)
	}
	c.rememberAssignment(deviceID, address, a)
	return a, nil
}

// rememberAssignment adds a new assignment to its device and its
// reservation in the caches.
func (c *Client) rememberAssignment(deviceID, address string, a *metalv1.IPAssignment) {
	c.editMu.Lock()
	defer c.editMu.Unlock()
	if o, ok, _ := c.devices.idx.GetByKey(deviceID); ok {
		d := *o.(*metalv1.Device)
		d.IpAddresses = append(slices.DeleteFunc(slices.Clone(d.IpAddresses), func(x metalv1.IPAssignment) bool {
			return x.GetId() == a.GetId()
		}), *a)
		c.devices.upsert(&d)
	}
	var candidates []string
	for _, s := range []string{address, a.GetAddress(), a.GetNetwork()} {
		if s == "" {
			continue
		}
		s, _, _ = strings.Cut(s, "/")
		candidates = append(candidates, s)
	}
	if pb := a.ParentBlock; pb != nil && pb.GetNetwork() != "" {
		candidates = append(candidates, pb.GetNetwork())
	}
	for _, addr := range candidates {
		objs, _ := c.reservations.idx.ByIndex(indexAddress, addr)
		if len(objs) == 0 {
			continue
		}
		r := *objs[0].(*resv) // a copy: the cached one may be read meanwhile
		r.assignments = append(slices.DeleteFunc(slices.Clone(r.assignments), func(x assignment) bool {
			return x.id == a.GetId()
		}), compactAssignment(a))
		c.reservations.upsert(&r)
		return
	}
}
