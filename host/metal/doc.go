// Package metal is the CCM's only access to the Equinix Metal API
// (equinix-sdk-go metalv1). Every other package goes through a *Client, so
// timeouts, retries, the rate limit, metrics, caching and the handling of
// credentials are decided once, here.
//
// # Calls
//
// Every method takes the caller's context. Each HTTP attempt is bounded by
// Options.Timeout; each call (all attempts and waits) by a budget derived
// from the timeout, the retries and the longest backoff, and by the caller's
// context. One token bucket (Options.QPS, Options.Burst) paces every
// request of the Client, retries included; waiting for a token does not
// count against an attempt's timeout.
//
// # Retries
//
// GET, HEAD and DELETE are retried (go-retryablehttp, up to Options.Retries
// times, exponential backoff with jitter between RetryWaitMin and
// RetryWaitMax) after a transport error or timeout, a 5xx other than 501,
// or a 429/503. A Retry-After header is honoured; one asking for longer than
// RetryWaitMax is not waited for: the call fails at once with an *callError whose
// RetryAfter tells the caller when to requeue. These methods are safe to
// repeat: reading twice, or deleting what is already gone (a 404 from
// DeleteIP counts as success), changes nothing.
//
// POST is never retried by the HTTP layer: a POST that timed out may have
// created its object, and repeating it blindly would create a second one.
// The one POST that is retried is RequestReservation's, and only because
// after an attempt whose outcome is unknown (timeout, transport error, 5xx)
// it re-reads the project's reservations and looks for its tags before the
// next attempt, so an earlier attempt that did succeed is found rather than
// duplicated. Otherwise a new reservation costs its POST alone: the lookup
// by tags is answered from the reservation cache, which is re-read first
// only if it is older than RefreshPeriod or was never filled. EnsureDeviceBGPSession's POST is safe to repeat because the
// API refuses a second session (422), which counts as success.
//
// # Caches
//
// Two caches replace repeated listings:
//
//   - devices: every device of the project (all pages, with
//     ip_addresses.parent_block), indexed by ID and hostname. Device and
//     DeviceByHostname answer from it; a miss costs one GET (by ID) or one
//     hostname-filtered listing (by hostname), whose answer is added.
//     DeviceFresh bypasses the cache; ForgetDevice drops an entry.
//   - IP reservations: every public IPv4 reservation of the project, and
//     every public IPv6 one but a device's management block (all pages,
//     with assignments), indexed by tag, assignment ID and address.
//     ReservationsWithTags answers from it; ReservationsWithTagsFresh and
//     RefreshReservations re-read first.
//
// Both are filled by a full listing on first use and re-read every
// Options.RefreshPeriod by Run. Concurrent re-reads are collapsed into one;
// a "fresh" read waits for a listing that started after it was asked for.
// Our own writes (RequestReservation, Reservation, DeleteIP, AssignIP,
// DeviceFresh) update the caches at once (an assignment moves in both the
// reservation and the device), and a re-read that was already under way when
// such a write landed does not undo it. So a reconcile with nothing
// to change makes no API call, and the cache is at most one RefreshPeriod
// behind changes made outside this process.
//
// Values returned from a cache share nested data with it: treat them as
// read-only.
//
// # Errors and secrets
//
// Every failure is an *callError whose message is one line: the operation, the
// HTTP status and the API's own message, for example
//
//	request IP reservation: 422 Unprocessable Entity: "metro sv has no public IPv4 available"
//
// IsNotFound is true only for an authoritative answer (a 404, or a complete
// listing without the object), never for a timeout or a 5xx. A response the
// SDK cannot decode and a transport error give an error, never a nil
// dereference. The API key is only ever written into the X-Auth-Token header;
// it and the BGP password are removed from any text that could reach an
// error, and the SDK's debug dump is off.
//
// # Metrics
//
// Registered in k8s.io/component-base/metrics/legacyregistry, so the CCM's
// /metrics endpoint serves them: equinix_metal_api_requests_total{operation,
// code}, equinix_metal_api_request_duration_seconds{operation},
// equinix_metal_api_retries_total{operation},
// equinix_metal_api_rate_limiter_wait_seconds{operation},
// equinix_metal_cache_requests_total{cache,result},
// equinix_metal_cache_refreshes_total{cache,result} and
// equinix_metal_cache_objects{cache}. The operation label has one value per
// API operation (get_device, list_project_devices, get_project_bgp_config,
// request_project_bgp_config, create_bgp_session, list_bgp_sessions,
// get_bgp_neighbors, list_ip_reservations, request_ip_reservation, get_ip,
// delete_ip, create_ip_assignment).
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package metal
