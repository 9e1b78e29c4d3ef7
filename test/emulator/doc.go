// Package emulator is an in-memory Equinix Metal API for tests, the
// sandbox and benchmarks: it speaks the real paths, status codes and JSON
// of the metalv1 API (as equinix-sdk-go v0.66.0 and its OpenAPI spec
// describe them), so the CCM's real client runs against it unchanged.
//
// # API
//
// Everything is served below BasePath (/metal/v1), like
// https://api.equinix.com/metal/v1; point the SDK at Emulator.URL (or use
// Emulator.Configuration or Emulator.Client). Requests need an X-Auth-Token
// header naming a seeded token (401 otherwise; 403 for a project the token
// may not use, and for writes with a read-only token). Errors have the
// API's body, {"errors":["..."]} ({"error":"..."} for 401). The endpoints:
//
//	GET    /devices/{id}                 device; include=ip_addresses.parent_block expands parent blocks, include=project the project
//	GET    /projects/{id}/devices        paginated; filters hostname (substring), tag, metro, facility, search
//	GET    /projects/{id}/bgp-config     {} when BGP was never enabled
//	POST   /projects/{id}/bgp-configs    204; local is enabled at once, global stays "requested"; 422 when already enabled
//	POST   /devices/{id}/bgp/sessions    201; 422 "... already has session ..." on a second one per address family
//	GET    /devices/{id}/bgp/sessions
//	GET    /devices/{id}/bgp/neighbors   one entry per address family with a session
//	GET    /projects/{id}/ips            paginated (250 per page by default); types=... filter; include=assignments
//	POST   /projects/{id}/ips            201; public_ipv4 (metro or facility), global_ipv4, public_ipv6; quantity a power of two
//	GET    /ips/{id}                     a reservation or an assignment
//	DELETE /ips/{id}                     204; deletes a reservation (422 while assigned) or removes an assignment
//	POST   /devices/{id}/ips             201; {"address":"<ip>"} assigns an Elastic IP of the device's project
//	GET    /devices/{id}/ips
//	GET    /projects/{id}, /locations/metros, /locations/metros/{id}, /facilities
//
// Lists take page and per_page (default 10, at most 1000) and answer with
// meta {first, last, next, previous, self, total, current_page, last_page},
// which the SDK's ExecuteWithPagination follows.
//
// Responses are built from the SDK's own model types, so their shape
// matches by construction; the tests also validate every response against
// the OpenAPI spec that ships in the SDK module (package specvalidate),
// with additionalProperties:false added to every object schema.
//
// From a test, with every exchange checked against the spec:
//
//	e := emulator.StartForTest(t, seed, emulator.Options{})
//	cfg := e.Configuration(emulator.DefaultToken)
//	specvalidate.Instrument(t, cfg, specvalidate.Options{})
//	client := metalv1.NewAPIClient(cfg)
//
// # State and seeding
//
// The state lives in memory behind one lock and is safe for concurrent
// use. It starts from a Seed: Go values, or a JSON/YAML file (LoadSeed)
// with tokens, metros (each with a public IPv4, private IPv4 and IPv6
// block), facilities, projects (optionally with BGP enabled), devices
// (plan, state, tags, BGP sessions and neighbour data) and reservations
// (with tags, and assignments to devices). DefaultSeed is one project,
// four metros and the token DefaultToken.
//
// Like the real platform, each device gets a public IPv4 /31 (its own
// management block), a private IPv4 /31 from a /25 of its project in its
// metro (the parent_block the CCM annotates as the node's private
// network), and an IPv6 /127 from a /56 of its project. These management
// blocks appear in GET /projects/{id}/ips next to the Elastic IPs. Every
// address comes from the metro's blocks and is never handed out twice
// while held; released blocks are reused only when fresh space runs out.
// An API request for public_ipv6 gets a block of its quantity (a /128 for
// one address) from the metro's IPv6 block, outside every project's /56,
// with address_family 6; a metro seeded with no_ipv6_reservations refuses
// it with 422. Both are assumptions: Equinix documents no Elastic IPv6
// request (docs/ipv6-plan.md), only that Terraform counts IPv6 blocks in
// /64s. A device's IPv6 session gives neighbour data of family 6: peer_ips
// fc00::e and fc00::f and customer_ip the device's public IPv6, as
// packethost/network-helpers' test data shows.
// BGP neighbours default to peer_ips 169.254.255.1 and 169.254.255.2,
// peer_as 65530, customer_as the project's ASN (65000) and customer_ip the
// device's private IPv4.
//
// Reservations requested through the API can stay "pending" for
// Options.ReservationPendingFor before turning "created" (the CCM's
// "Requested" state); a project's ApprovalThreshold makes large requests
// need approval (422 with fail_on_approval_required, otherwise pending
// until ApproveReservation).
//
// Tests read the state back with Devices, Device, Reservations (with tag
// filters), Reservation, BGPConfig and BGPSessions, and change it with
// Apply, AddDevice(s), AddReservation(s), AssignIP, SetDeviceState,
// DeleteDevice, SetBGPConfig and ApproveReservation. AddDevices and
// AddReservations build thousands of entities in milliseconds.
//
// # Faults and counters
//
// Each route (a Route constant such as RouteListIPReservations, or
// AllRoutes) can carry a standing Fault: added latency and jitter, a share
// of 429 answers with Retry-After, a share of 5xx answers, and a share of
// connection resets. FailNext scripts the next N calls of a route to fail
// in a given way. Every request is counted per route (method and path
// pattern) and per answer status: Count, Counts, Stats, TotalRequests and
// ResetCounts.
//
// # Admin endpoints
//
// Below AdminPath (/_emulator), without a token, for the sandbox and for
// benchmarks run from another process:
//
//	GET    /_emulator/healthz
//	GET    /_emulator/routes                    the Route names
//	GET    /_emulator/counters                  {"total":N,"routes":{"GET /devices/{id}":{"requests":N,"statuses":{"200":N}}}}
//	DELETE /_emulator/counters                  reset
//	GET    /_emulator/faults                    standing and scripted faults
//	POST   /_emulator/faults                    {"route":"GET /devices/{id}","latency":"50ms","rate_limit_share":0.1,"retry_after":"2s",...}
//	DELETE /_emulator/faults                    remove all faults
//	POST   /_emulator/fail-next                 {"route":"POST /projects/{id}/ips","count":2,"status":503} or {"route":"*","reset":true}
//	GET    /_emulator/state                     projects with their BGP config, devices and reservations
//	POST   /_emulator/seed                      add a seed (JSON, or YAML with a yaml Content-Type)
//	POST   /_emulator/devices/{id}/state        {"state":"inactive"}
//	DELETE /_emulator/devices/{id}
//	POST   /_emulator/reservations/{id}/approve
//
// The command test/cmd/metal-emulator serves an emulator on an address from a
// seed file.
package emulator
