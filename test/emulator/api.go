package emulator

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// The read-back types below are snapshots: copies taken under the lock,
// safe to keep and compare.

// Project is a project as the emulator holds it.
type Project struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Device is a device as the emulator holds it.
type Device struct {
	ID       string   `json:"id"`
	Project  string   `json:"project"`
	Hostname string   `json:"hostname"`
	Metro    string   `json:"metro"`
	Facility string   `json:"facility,omitempty"`
	Plan     string   `json:"plan"`
	State    string   `json:"state"`
	Tags     []string `json:"tags,omitempty"`
	// Addresses are all its assignments: management addresses first, then
	// Elastic IPs in the order they were assigned.
	Addresses   []Assignment `json:"addresses"`
	BGPSessions []BGPSession `json:"bgp_sessions,omitempty"`
}

// Address returns the device's management address of a reservation type
// (TypePublicIPv4, TypePrivateIPv4 or TypePublicIPv6), if it has one.
func (d Device) Address(typ string) (netip.Addr, bool) {
	for _, a := range d.Addresses {
		if a.Management && a.Type == typ {
			return a.Address, true
		}
	}
	return netip.Addr{}, false
}

// Assignment is an address (or block) of a reservation assigned to a device.
type Assignment struct {
	ID                string       `json:"id"`
	Device            string       `json:"device"`
	Reservation       string       `json:"reservation"`
	ReservationPrefix netip.Prefix `json:"reservation_prefix"`
	Type              string       `json:"type"`    // the reservation's type
	Address           netip.Addr   `json:"address"` // the device's address (for a /31, the second one)
	Prefix            netip.Prefix `json:"prefix"`
	Management        bool         `json:"management"`
}

// Reservation is an IP reservation.
type Reservation struct {
	ID          string         `json:"id"`
	Project     string         `json:"project"`
	Type        string         `json:"type"`
	Metro       string         `json:"metro,omitempty"`
	Facility    string         `json:"facility,omitempty"`
	Prefix      netip.Prefix   `json:"prefix"`
	State       string         `json:"state"`
	Tags        []string       `json:"tags,omitempty"`
	Details     string         `json:"details,omitempty"`
	Comments    string         `json:"comments,omitempty"`
	Customdata  map[string]any `json:"customdata,omitempty"`
	Management  bool           `json:"management"`
	CreatedAt   time.Time      `json:"created_at"`
	Assignments []Assignment   `json:"assignments,omitempty"`
}

// HasTags reports whether the reservation carries all the tags.
func (r Reservation) HasTags(tags ...string) bool {
	for _, t := range tags {
		if !slices.Contains(r.Tags, t) {
			return false
		}
	}
	return true
}

// BGPConfig is a project's BGP configuration.
type BGPConfig struct {
	ID             string `json:"id"`
	ASN            int64  `json:"asn"`
	MD5            string `json:"md5,omitempty"`
	DeploymentType string `json:"deployment_type"`
	Status         string `json:"status"`
	UseCase        string `json:"use_case,omitempty"`
	MaxPrefix      int    `json:"max_prefix"`
}

// BGPSession is a device's BGP session.
type BGPSession struct {
	ID            string `json:"id"`
	Device        string `json:"device"`
	AddressFamily string `json:"address_family"`
	DefaultRoute  bool   `json:"default_route"`
}

func (s *store) snapAssignment(a *assignment) Assignment {
	return Assignment{
		ID: a.id, Device: a.device.id, Reservation: a.res.id, Type: a.res.typ, Address: a.address(),
		Prefix: a.prefix, Management: a.management, ReservationPrefix: a.res.prefix,
	}
}

func (s *store) snapDevice(d *device) Device {
	out := Device{
		ID: d.id, Project: d.project.id, Hostname: d.hostname, Metro: d.metro.code, Plan: d.plan, State: d.state,
		Tags: slices.Clone(d.tags), Addresses: make([]Assignment, 0, len(d.assignments)),
	}
	if d.facility != nil {
		out.Facility = d.facility.code
	}
	for _, a := range d.assignments {
		out.Addresses = append(out.Addresses, s.snapAssignment(a))
	}
	for _, ss := range d.sessions {
		out.BGPSessions = append(out.BGPSessions, BGPSession{ID: ss.id, Device: d.id, AddressFamily: ss.family, DefaultRoute: ss.defaultRoute})
	}
	return out
}

func (s *store) snapReservation(r *reservation) Reservation {
	out := Reservation{
		ID: r.id, Project: r.project.id, Type: r.typ, Prefix: r.prefix, State: r.state(s.now()),
		Tags: slices.Clone(r.tags), Details: r.details, Comments: r.comments, Customdata: maps.Clone(r.customdata),
		Management: r.management, CreatedAt: r.createdAt,
	}
	if r.metro != nil {
		out.Metro = r.metro.code
	}
	if r.facility != nil {
		out.Facility = r.facility.code
	}
	for _, a := range r.assignments {
		out.Assignments = append(out.Assignments, s.snapAssignment(a))
	}
	return out
}

// Projects lists the projects.
func (e *Emulator) Projects() []Project {
	s := e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Project, 0, len(s.projects))
	for _, p := range s.projects {
		out = append(out, Project{ID: p.id, Name: p.name})
	}
	return out
}

// PublicIPv4Blocks maps each metro's code to the block its public IPv4
// addresses come from, Elastic IPs (a metro's or one of its facilities')
// among them: what Equinix routes in that metro and nowhere else.
func (e *Emulator) PublicIPv4Blocks() map[string]string {
	return e.metroBlocks(func(m *metro) *pool { return m.public4 })
}

// PublicIPv6Blocks maps each metro code to its public IPv6 block: the
// projects' /56s and the public_ipv6 reservations come from it.
func (e *Emulator) PublicIPv6Blocks() map[string]string {
	return e.metroBlocks(func(m *metro) *pool { return m.pub6 })
}

// metroBlocks maps each metro's code to the prefix of one of its pools.
func (e *Emulator) metroBlocks(of func(*metro) *pool) map[string]string {
	s := e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]string, len(s.metros))
	for _, m := range s.metros {
		out[m.code] = of(m).prefix.String()
	}
	return out
}

// Devices lists a project's devices in creation order.
func (e *Emulator) Devices(projectID string) []Device {
	s := e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := s.projectByID[strings.ToLower(projectID)]
	if p == nil {
		return nil
	}
	out := make([]Device, 0, len(p.devices))
	for _, d := range p.devices {
		out = append(out, s.snapDevice(d))
	}
	return out
}

// Device returns one device.
func (e *Emulator) Device(id string) (Device, bool) {
	s := e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devices[strings.ToLower(id)]
	if d == nil {
		return Device{}, false
	}
	return s.snapDevice(d), true
}

// DeviceByHostname returns the first device of the project with that
// hostname.
func (e *Emulator) DeviceByHostname(projectID, hostname string) (Device, bool) {
	s := e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	if p := s.projectByID[strings.ToLower(projectID)]; p != nil {
		for _, d := range p.devices {
			if d.hostname == hostname {
				return s.snapDevice(d), true
			}
		}
	}
	return Device{}, false
}

// Reservations lists a project's reservations in creation order. With
// tags, only those carrying all of them. Management blocks (the devices'
// /31s, the project's /25s and /56s) are included, as on the API.
func (e *Emulator) Reservations(projectID string, tags ...string) []Reservation {
	s := e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := s.projectByID[strings.ToLower(projectID)]
	if p == nil {
		return nil
	}
	var out []Reservation
	for _, r := range p.reservations {
		snap := s.snapReservation(r)
		if snap.HasTags(tags...) {
			out = append(out, snap)
		}
	}
	return out
}

// ElasticReservations lists a project's reservations that are not
// management blocks, optionally only those carrying all the tags.
func (e *Emulator) ElasticReservations(projectID string, tags ...string) []Reservation {
	var out []Reservation
	for _, r := range e.Reservations(projectID, tags...) {
		if !r.Management {
			out = append(out, r)
		}
	}
	return out
}

// Reservation returns one reservation.
func (e *Emulator) Reservation(id string) (Reservation, bool) {
	s := e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.reservations[strings.ToLower(id)]
	if r == nil {
		return Reservation{}, false
	}
	return s.snapReservation(r), true
}

// BGPConfig returns a project's BGP configuration, if it has one.
func (e *Emulator) BGPConfig(projectID string) (BGPConfig, bool) {
	s := e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := s.projectByID[strings.ToLower(projectID)]
	if p == nil || p.bgp == nil {
		return BGPConfig{}, false
	}
	b := p.bgp
	return BGPConfig{ID: b.id, ASN: b.asn, MD5: b.md5, DeploymentType: b.deploymentType, Status: b.status, UseCase: b.useCase, MaxPrefix: b.maxPrefix}, true
}

// BGPSessions lists a device's BGP sessions.
func (e *Emulator) BGPSessions(deviceID string) []BGPSession {
	d, ok := e.Device(deviceID)
	if !ok {
		return nil
	}
	return d.BGPSessions
}

// --- changing the state from Go -----------------------------------------------

// RevokeToken makes the API answer 401 to token from now on, as when a key
// is deleted in the console.
func (e *Emulator) RevokeToken(token string) {
	e.store.mu.Lock()
	defer e.store.mu.Unlock()
	delete(e.store.tokens, token)
}

// Apply adds a seed to the running emulator: new tokens, metros,
// facilities, projects, devices and reservations.
func (e *Emulator) Apply(seed *Seed) error { return e.store.apply(seed) }

// AddDevice adds one device and returns it.
func (e *Emulator) AddDevice(d DeviceSeed) (Device, error) {
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	dv, err := s.addDevice(d)
	if err != nil {
		return Device{}, err
	}
	return s.snapDevice(dv), nil
}

// AddDevices adds n devices built from a template. The template's
// Hostname is a fmt format with one %d verb for the index (0..n-1), for
// example "worker-%04d"; without a verb, "-<index>" is appended. IDs and
// explicit addresses of the template are ignored.
func (e *Emulator) AddDevices(n int, tmpl DeviceSeed) ([]Device, error) {
	if tmpl.Hostname == "" {
		tmpl.Hostname = "node-%d"
	}
	if !strings.Contains(tmpl.Hostname, "%") {
		tmpl.Hostname += "-%d"
	}
	tmpl.ID, tmpl.PublicIPv4, tmpl.PrivateIPv4, tmpl.PublicIPv6 = "", "", "", ""
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Device, 0, n)
	for i := 0; i < n; i++ {
		d := tmpl
		d.Hostname = fmt.Sprintf(tmpl.Hostname, i)
		dv, err := s.addDevice(d)
		if err != nil {
			return out, fmt.Errorf("device %d: %w", i, err)
		}
		out = append(out, s.snapDevice(dv))
	}
	return out, nil
}

// AddReservation adds one reservation, as a seed would (it is "created"
// at once unless Pending is set), and returns it.
func (e *Emulator) AddReservation(r ReservationSeed) (Reservation, error) {
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.addReservationSeed(r)
	if err != nil {
		return Reservation{}, err
	}
	return s.snapReservation(res), nil
}

// AddReservations adds n reservations built from a template (its ID,
// Address and AssignedTo are ignored). tagsFor, when not nil, gives the
// tags of reservation i; otherwise every one gets the template's tags.
func (e *Emulator) AddReservations(n int, tmpl ReservationSeed, tagsFor func(i int) []string) ([]Reservation, error) {
	tmpl.ID, tmpl.Address, tmpl.AssignedTo = "", "", nil
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Reservation, 0, n)
	for i := 0; i < n; i++ {
		r := tmpl
		if tagsFor != nil {
			r.Tags = tagsFor(i)
		}
		res, err := s.addReservationSeed(r)
		if err != nil {
			return out, fmt.Errorf("reservation %d: %w", i, err)
		}
		out = append(out, s.snapReservation(res))
	}
	return out, nil
}

// SetDeviceState changes a device's state ("inactive" makes
// InstanceShutdown true, for example).
func (e *Emulator) SetDeviceState(id, state string) error {
	if !slices.Contains(deviceStates, state) {
		return fmt.Errorf("%q is not a device state", state)
	}
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devices[strings.ToLower(id)]
	if d == nil {
		return fmt.Errorf("device %s does not exist", id)
	}
	d.state = state
	d.updatedAt = s.now()
	return nil
}

// DeleteDevice removes a device: its addresses go back to the pools and its
// Elastic IP assignments and BGP sessions disappear. Afterwards the API
// answers 404 for it.
func (e *Emulator) DeleteDevice(id string) error {
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devices[strings.ToLower(id)]
	if d == nil {
		return fmt.Errorf("device %s does not exist", id)
	}
	s.deleteDevice(d)
	return nil
}

// AssignIP assigns an address or block of a reservation of the device's
// project to the device, as POST /devices/{id}/ips does.
func (e *Emulator) AssignIP(deviceID, address string) (Assignment, error) {
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devices[strings.ToLower(deviceID)]
	if d == nil {
		return Assignment{}, fmt.Errorf("device %s does not exist", deviceID)
	}
	a, err := s.assign(d, address)
	if err != nil {
		return Assignment{}, err
	}
	return s.snapAssignment(a), nil
}

// ApproveReservation ends the review of a reservation that needed approval
// (see ProjectSeed.ApprovalThreshold and ReservationSeed.Pending). It
// still waits out Options.ReservationPendingFor.
func (e *Emulator) ApproveReservation(id string) error {
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reservations[strings.ToLower(id)]
	if r == nil {
		return fmt.Errorf("reservation %s does not exist", id)
	}
	r.approval = false
	return nil
}

// SetBGPConfig sets (or replaces) a project's BGP configuration.
func (e *Emulator) SetBGPConfig(projectID string, b BGPConfigSeed) error {
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projectByID[strings.ToLower(projectID)]
	if p == nil {
		return fmt.Errorf("project %s does not exist", projectID)
	}
	return s.setBGP(p, b)
}

// ClearBGPConfig removes a project's BGP configuration (GET bgp-config then
// answers {}), and every session of its devices.
func (e *Emulator) ClearBGPConfig(projectID string) error {
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projectByID[strings.ToLower(projectID)]
	if p == nil {
		return errors.New("project " + projectID + " does not exist")
	}
	p.bgp = nil
	for _, d := range p.devices {
		for _, ss := range d.sessions {
			delete(s.sessions, ss.id)
		}
		d.sessions = nil
	}
	return nil
}

// --- counters and faults from Go --------------------------------------------------

// Count is the number of requests a route has received since the last
// ResetCounts.
func (e *Emulator) Count(r Route) int64 {
	if rc := e.counters.routes[r]; rc != nil {
		return rc.requests.Load()
	}
	return 0
}

// Counts is the number of requests per route (routes without requests are
// left out).
func (e *Emulator) Counts() map[Route]int64 {
	out := map[Route]int64{}
	for r, rc := range e.counters.routes {
		if n := rc.requests.Load(); n > 0 {
			out[r] = n
		}
	}
	return out
}

// TotalRequests is the number of API requests since the last ResetCounts.
func (e *Emulator) TotalRequests() int64 { return e.counters.total.Load() }

// Stats is the requests and answers (by status) per route.
func (e *Emulator) Stats() map[Route]RouteStats { return e.counters.stats() }

// ResetCounts zeroes every counter.
func (e *Emulator) ResetCounts() { e.counters.reset() }

// SetFault sets the standing fault of a route (AllRoutes: of every route
// without its own); the zero Fault removes it. It panics on a Route that is
// not one of the constants.
func (e *Emulator) SetFault(r Route, f Fault) {
	mustRoute(r)
	e.faults.set(r, f)
}

// FailNext makes the next n requests of a route (AllRoutes: of any route)
// fail as f says, before standing faults and before authentication.
// Successive calls queue up.
func (e *Emulator) FailNext(r Route, n int, f Failure) {
	mustRoute(r)
	e.faults.failNext(r, n, f)
}

// ClearFaults removes every standing and scripted fault.
func (e *Emulator) ClearFaults() { e.faults.clear() }

// Faults returns the standing faults and the scripted failures still
// queued, per route.
func (e *Emulator) Faults() (map[Route]Fault, map[Route][]Failure) { return e.faults.snapshot() }
