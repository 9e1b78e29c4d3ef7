// The idempotent create: RequestReservation reserves an Elastic IP once
// per tag set and family, across retries, lost answers and restarts. It is
// apart from the single calls (ipcalls.go) because its POST is the one that
// is retried, and what makes that safe (the lookup first, the memory of
// unknown outcomes) is all here.

package metal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

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

// RequestReservation returns the reservation of r's family (r.IPv6) that
// carries all of r.Tags, creating it if there is none.
//
// A new Service costs one POST: the lookup by tags is answered from the
// reservation cache, which holds every reservation of the project as of a
// listing no older than RefreshPeriod plus our own writes since. The
// project is listed again before the lookup only when that is not enough to
// rule out a duplicate:
//
//   - the cache has never been filled (a new process, e.g. after a crash or a
//     leader change: the first listing finds what the previous one made);
//   - an earlier attempt for the same tags and family ended without knowing
//     whether the API created the reservation (a timeout, a transport error or a 5xx):
//     the attempt then waits for a listing that started after that failure,
//     in this call or a later one, so a lost answer never leads to a second
//     reservation;
//   - the cache's listing is older than RefreshPeriod (Run missed a refresh),
//     so a reservation made by hand in the meantime is seen. The listing
//     already under way, if any, is shared with concurrent callers.
//
// Calls with the same tags and family are serialised in this process, and a
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

// Family is the address family of what r asks for: 4 or 6.
func (r ReservationRequest) Family() int32 {
	if r.IPv6 {
		return 6
	}
	return 4
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

// uncertain tells whether a reservation request for this key (its tag set
// and family) ended without knowing whether the API created it.
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
