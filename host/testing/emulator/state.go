package emulator

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Reservation types.
const (
	TypePublicIPv4  = "public_ipv4"
	TypeGlobalIPv4  = "global_ipv4"
	TypePrivateIPv4 = "private_ipv4"
	TypePublicIPv6  = "public_ipv6"
)

// Reservation states, as the real API reports them.
const (
	StatePending = "pending"
	StateCreated = "created"
)

// apiError is an error with the HTTP status the API answers for it.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

var errNotFound = &apiError{status: 404, msg: "Not found"}

type metro struct {
	id, code, name, country string
	public4, private4, pub6 *pool
}

type facility struct {
	id, code, name string
	metro          *metro
}

type project struct {
	id, name          string
	createdAt         time.Time
	devices           []*device
	reservations      []*reservation
	bgp               *bgpConfig
	approvalThreshold int
	// The project's management blocks per metro: private /25s and IPv6 /56s.
	private4Blocks map[*metro][]*reservation
	pub6Blocks     map[*metro][]*reservation
}

type bgpConfig struct {
	id                     string
	asn                    int64
	md5                    string
	deploymentType, status string
	useCase                string
	maxPrefix              int
	createdAt, requestedAt time.Time
}

type device struct {
	id, hostname string
	project      *project
	metro        *metro
	facility     *facility
	plan, state  string
	tags         []string
	createdAt    time.Time
	updatedAt    time.Time
	assignments  []*assignment
	sessions     []*bgpSession
	neighbors    []BGPNeighborSeed
}

type bgpSession struct {
	id           string
	device       *device
	family       string // ipv4 or ipv6
	defaultRoute bool
	createdAt    time.Time
}

type reservation struct {
	id         string
	project    *project
	typ        string
	metro      *metro
	facility   *facility
	prefix     netip.Prefix
	tags       []string
	details    string
	comments   string
	customdata map[string]any
	createdAt  time.Time
	readyAt    time.Time // pending until then
	approval   bool      // pending until approved
	management bool      // a device's /31 or a project's /25 or /56
	// deviceBlock marks a device's public /31, deleted with the device.
	deviceBlock bool
	assignments []*assignment
	from        *pool // the pool the prefix came from
	sub         *pool // for project blocks: where the devices' blocks come from
}

type assignment struct {
	id         string
	res        *reservation
	device     *device
	prefix     netip.Prefix
	createdAt  time.Time
	management bool
}

func (a *assignment) address() netip.Addr {
	if a.management && a.prefix.Bits() == hostBits(a.prefix.Addr())-1 {
		// A device's /31 (or /127): the gateway is the first address.
		return nthAddr(a.prefix, 1)
	}
	return a.prefix.Masked().Addr()
}

func (a *assignment) gateway() netip.Addr { return a.prefix.Masked().Addr() }

func (r *reservation) state(now time.Time) string {
	if r.approval || now.Before(r.readyAt) {
		return StatePending
	}
	return StateCreated
}

func (r *reservation) family() int {
	if r.prefix.Addr().Is4() {
		return 4
	}
	return 6
}

type token struct {
	token    string
	projects map[string]bool // nil: all
	readOnly bool
}

func (t *token) canUse(p *project) bool { return t.projects == nil || t.projects[p.id] }

// store is the emulator's state. One lock guards everything: requests are
// short, so a single RWMutex is far from being the bottleneck.
type store struct {
	mu  sync.RWMutex
	now func() time.Time

	rngMu sync.Mutex
	rng   *rand.Rand

	pendingFor time.Duration

	tokens       map[string]*token
	metros       []*metro
	metroByCode  map[string]*metro
	metroByID    map[string]*metro
	facilities   []*facility
	facByCode    map[string]*facility
	facByID      map[string]*facility
	projects     []*project
	projectByID  map[string]*project
	devices      map[string]*device
	reservations map[string]*reservation
	assignments  map[string]*assignment
	sessions     map[string]*bgpSession
	global4      *pool
}

func newStore(now func() time.Time, seed uint64, pendingFor time.Duration) *store {
	return &store{
		now:          now,
		rng:          rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		pendingFor:   pendingFor,
		tokens:       map[string]*token{},
		metroByCode:  map[string]*metro{},
		metroByID:    map[string]*metro{},
		facByCode:    map[string]*facility{},
		facByID:      map[string]*facility{},
		projectByID:  map[string]*project{},
		devices:      map[string]*device{},
		reservations: map[string]*reservation{},
		assignments:  map[string]*assignment{},
		sessions:     map[string]*bgpSession{},
	}
}

func (s *store) float64() float64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64()
}

// newID returns a random (version 4) UUID.
func (s *store) newID() string {
	s.rngMu.Lock()
	a, b := s.rng.Uint64(), s.rng.Uint64()
	s.rngMu.Unlock()
	var u [16]byte
	for i := 0; i < 8; i++ {
		u[i] = byte(a >> (8 * i))
		u[8+i] = byte(b >> (8 * i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// isUUID accepts the canonical 8-4-4-4-12 hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

func (s *store) idFor(given, what string, taken func(string) bool) (string, error) {
	if given == "" {
		for {
			id := s.newID()
			if !taken(id) {
				return id, nil
			}
		}
	}
	if !isUUID(given) {
		return "", fmt.Errorf("%s id %q is not a UUID", what, given)
	}
	given = strings.ToLower(given)
	if taken(given) {
		return "", fmt.Errorf("%s id %s is used twice", what, given)
	}
	return given, nil
}

func (s *store) idTaken(id string) bool {
	if _, ok := s.devices[id]; ok {
		return true
	}
	if _, ok := s.reservations[id]; ok {
		return true
	}
	if _, ok := s.assignments[id]; ok {
		return true
	}
	if _, ok := s.projectByID[id]; ok {
		return true
	}
	if _, ok := s.sessions[id]; ok {
		return true
	}
	_, ok := s.metroByID[id]
	return ok
}

// --- seeding -----------------------------------------------------------

// apply adds a seed to the state. It is all or nothing only as far as
// validation goes: entities are added in order, and the first error stops.
func (s *store) apply(sd *Seed) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range sd.Tokens {
		if t.Token == "" {
			return errors.New("seed: a token is empty")
		}
		tk := &token{token: t.Token, readOnly: t.ReadOnly}
		if len(t.Projects) > 0 {
			tk.projects = map[string]bool{}
			for _, p := range t.Projects {
				tk.projects[strings.ToLower(p)] = true
			}
		}
		s.tokens[t.Token] = tk
	}
	for _, m := range sd.Metros {
		if err := s.addMetro(m); err != nil {
			return fmt.Errorf("seed: metro %q: %w", m.Code, err)
		}
	}
	if sd.GlobalIPv4 != "" || s.global4 == nil {
		g := sd.GlobalIPv4
		if g == "" {
			g = "198.19.0.0/20"
		}
		p, err := netip.ParsePrefix(g)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("seed: global_ipv4 %q is not an IPv4 prefix", g)
		}
		if s.global4 != nil && s.global4.prefix != p.Masked() {
			return errors.New("seed: global_ipv4 cannot change once set")
		}
		if s.global4 == nil {
			s.global4 = newPool(p)
		}
	}
	for _, f := range sd.Facilities {
		if err := s.addFacility(f); err != nil {
			return fmt.Errorf("seed: facility %q: %w", f.Code, err)
		}
	}
	for _, p := range sd.Projects {
		if err := s.addProject(p); err != nil {
			return fmt.Errorf("seed: project %q: %w", p.ID, err)
		}
	}
	for _, d := range sd.Devices {
		if _, err := s.addDevice(d); err != nil {
			return fmt.Errorf("seed: device %q: %w", d.Hostname, err)
		}
	}
	for i, r := range sd.Reservations {
		if _, err := s.addReservationSeed(r); err != nil {
			return fmt.Errorf("seed: reservation %d (tags %q): %w", i, r.Tags, err)
		}
	}
	return nil
}

func (s *store) addMetro(m MetroSeed) error {
	code := strings.ToLower(m.Code)
	if code == "" {
		return errors.New("code is empty")
	}
	if _, ok := s.metroByCode[code]; ok {
		return errors.New("code is used twice")
	}
	id, err := s.idFor(m.ID, "metro", s.idTaken)
	if err != nil {
		return err
	}
	n := len(s.metros) // default blocks by position
	parse := func(v, def string, want4 bool) (*pool, error) {
		if v == "" {
			v = def
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, err
		}
		if p.Addr().Is4() != want4 {
			return nil, fmt.Errorf("%s is of the wrong address family", v)
		}
		return newPool(p), nil
	}
	mt := &metro{id: id, code: code, name: m.Name, country: m.Country}
	if mt.name == "" {
		mt.name = strings.ToUpper(code)
	}
	if mt.country == "" {
		mt.country = "US"
	}
	def4 := ""
	switch {
	case m.PublicIPv4 != "":
	case n < 4:
		def4 = fmt.Sprintf("198.18.%d.0/18", n*64)
	case n < 7:
		// 198.19.0.0/18 is left to the default global_ipv4 block.
		def4 = fmt.Sprintf("198.19.%d.0/18", (n-3)*64)
	default:
		return errors.New("give public_ipv4: only 7 metros get a default block")
	}
	if mt.public4, err = parse(m.PublicIPv4, def4, true); err != nil {
		return err
	}
	if mt.private4, err = parse(m.PrivateIPv4, fmt.Sprintf("10.%d.0.0/16", n+1), true); err != nil {
		return err
	}
	if mt.pub6, err = parse(m.PublicIPv6, fmt.Sprintf("2001:db8:%x00::/40", n+1), false); err != nil {
		return err
	}
	for _, o := range s.metros {
		for _, pair := range [][2]*pool{{o.public4, mt.public4}, {o.private4, mt.private4}, {o.pub6, mt.pub6}} {
			if pair[0].prefix.Overlaps(pair[1].prefix) {
				return fmt.Errorf("block %s overlaps metro %s's %s", pair[1].prefix, o.code, pair[0].prefix)
			}
		}
	}
	s.metros = append(s.metros, mt)
	s.metroByCode[code] = mt
	s.metroByID[id] = mt
	return nil
}

func (s *store) addFacility(f FacilitySeed) error {
	code := strings.ToLower(f.Code)
	if code == "" {
		return errors.New("code is empty")
	}
	if _, ok := s.facByCode[code]; ok {
		return errors.New("code is used twice")
	}
	m := s.metroByCode[strings.ToLower(f.Metro)]
	if m == nil {
		return fmt.Errorf("metro %q is not seeded", f.Metro)
	}
	id, err := s.idFor(f.ID, "facility", func(id string) bool { return s.idTaken(id) || s.facByID[id] != nil })
	if err != nil {
		return err
	}
	fc := &facility{id: id, code: code, name: f.Name, metro: m}
	if fc.name == "" {
		fc.name = strings.ToUpper(code)
	}
	s.facilities = append(s.facilities, fc)
	s.facByCode[code] = fc
	s.facByID[id] = fc
	return nil
}

func (s *store) addProject(p ProjectSeed) error {
	id, err := s.idFor(p.ID, "project", s.idTaken)
	if err != nil {
		return err
	}
	pr := &project{
		id: id, name: p.Name, createdAt: s.now(), approvalThreshold: p.ApprovalThreshold,
		private4Blocks: map[*metro][]*reservation{}, pub6Blocks: map[*metro][]*reservation{},
	}
	if pr.name == "" {
		pr.name = "project-" + id[:8]
	}
	if p.BGP != nil {
		if err := s.setBGP(pr, *p.BGP); err != nil {
			return err
		}
	}
	s.projects = append(s.projects, pr)
	s.projectByID[id] = pr
	return nil
}

func (s *store) setBGP(pr *project, b BGPConfigSeed) error {
	id := b.ID
	if pr.bgp != nil && id == "" {
		id = pr.bgp.id
	} else {
		var err error
		if id, err = s.idFor(b.ID, "bgp config", s.idTaken); err != nil {
			return err
		}
	}
	c := &bgpConfig{
		id: id, asn: b.ASN, md5: b.MD5, deploymentType: b.DeploymentType, status: b.Status,
		maxPrefix: b.MaxPrefix, createdAt: s.now(), requestedAt: s.now(),
	}
	if c.asn == 0 {
		c.asn = 65000
	}
	if c.deploymentType == "" {
		c.deploymentType = "local"
	}
	if c.deploymentType != "local" && c.deploymentType != "global" {
		return fmt.Errorf("bgp deployment_type %q is neither local nor global", c.deploymentType)
	}
	if c.status == "" {
		c.status = "enabled"
	}
	switch c.status {
	case "enabled", "requested", "disabled":
	default:
		return fmt.Errorf("bgp status %q is not enabled, requested or disabled", c.status)
	}
	if c.maxPrefix == 0 {
		c.maxPrefix = 10
	}
	pr.bgp = c
	return nil
}

// projectFor resolves a project reference, defaulting to the only project.
func (s *store) projectFor(ref string) (*project, error) {
	if ref == "" {
		if len(s.projects) == 1 {
			return s.projects[0], nil
		}
		return nil, errors.New("project is required when there is not exactly one project")
	}
	p := s.projectByID[strings.ToLower(ref)]
	if p == nil {
		return nil, fmt.Errorf("project %q is not seeded", ref)
	}
	return p, nil
}

// locate resolves a metro and facility pair from codes (either may be empty).
func (s *store) locate(metroCode, facCode string, required bool) (*metro, *facility, error) {
	var m *metro
	var f *facility
	if facCode != "" {
		if f = s.facByCode[strings.ToLower(facCode)]; f == nil {
			return nil, nil, errf(422, "Facility %s not found", facCode)
		}
	}
	if metroCode != "" {
		if m = s.metroByCode[strings.ToLower(metroCode)]; m == nil {
			return nil, nil, errf(422, "Metro %s not found", metroCode)
		}
	}
	switch {
	case f != nil && m != nil && f.metro != m:
		return nil, nil, errf(422, "Facility %s is not in metro %s", f.code, m.code)
	case f != nil:
		m = f.metro
	case m == nil && required:
		if len(s.metros) == 0 {
			return nil, nil, errors.New("no metro is seeded")
		}
		m = s.metros[0]
	}
	return m, f, nil
}

var deviceStates = []string{"queued", "provisioning", "deprovisioning", "reinstalling", "active", "inactive", "failed", "powering_on", "powering_off", "deleted"}

func (s *store) addDevice(d DeviceSeed) (*device, error) {
	pr, err := s.projectFor(d.Project)
	if err != nil {
		return nil, err
	}
	if d.Hostname == "" {
		return nil, errors.New("hostname is empty")
	}
	m, f, err := s.locate(d.Metro, d.Facility, true)
	if err != nil {
		return nil, err
	}
	if f == nil {
		for _, fc := range s.facilities {
			if fc.metro == m {
				f = fc
				break
			}
		}
	}
	id, err := s.idFor(d.ID, "device", s.idTaken)
	if err != nil {
		return nil, err
	}
	dv := &device{
		id: id, hostname: d.Hostname, project: pr, metro: m, facility: f,
		plan: d.Plan, state: d.State, tags: slices.Clone(d.Tags), createdAt: s.now(),
		neighbors: slices.Clone(d.BGPNeighbors),
	}
	dv.updatedAt = dv.createdAt
	if dv.plan == "" {
		dv.plan = "c3.small.x86"
	}
	if dv.state == "" {
		dv.state = "active"
	}
	if !slices.Contains(deviceStates, dv.state) {
		return nil, fmt.Errorf("state %q is not a device state", dv.state)
	}
	// Addresses: public IPv4 /31 (its own management block), private IPv4
	// /31 from a project /25, IPv6 /127 from a project /56.
	undo := func() {
		for _, a := range dv.assignments {
			s.unassign(a)
		}
	}
	if !d.NoPublicIPv4 {
		if err := s.addDevicePublic4(dv, d.PublicIPv4); err != nil {
			undo()
			return nil, fmt.Errorf("public IPv4: %w", err)
		}
	}
	if !d.NoPrivateIPv4 {
		if err := s.addDeviceFromProjectBlock(dv, d.PrivateIPv4, TypePrivateIPv4); err != nil {
			undo()
			return nil, fmt.Errorf("private IPv4: %w", err)
		}
	}
	if !d.NoPublicIPv6 {
		if err := s.addDeviceFromProjectBlock(dv, d.PublicIPv6, TypePublicIPv6); err != nil {
			undo()
			return nil, fmt.Errorf("public IPv6: %w", err)
		}
	}
	for _, fam := range d.BGPSessions {
		if fam != "ipv4" && fam != "ipv6" {
			undo()
			return nil, fmt.Errorf("bgp session family %q is neither ipv4 nor ipv6", fam)
		}
		sid := s.newUnusedID()
		ss := &bgpSession{id: sid, device: dv, family: fam, createdAt: s.now()}
		dv.sessions = append(dv.sessions, ss)
		s.sessions[sid] = ss
	}
	pr.devices = append(pr.devices, dv)
	s.devices[id] = dv
	for _, a := range dv.assignments {
		s.assignments[a.id] = a
	}
	return dv, nil
}

func (s *store) newUnusedID() string {
	id, _ := s.idFor("", "", s.idTaken)
	return id
}

// held reports whether a block overlaps any reservation drawn from the pool.
func (s *store) heldIn(pl *pool) func(netip.Prefix) bool {
	return func(b netip.Prefix) bool {
		for _, r := range s.reservations {
			if r.from == pl && r.prefix.Overlaps(b) {
				return true
			}
		}
		return false
	}
}

func parseAddr(v string) (netip.Addr, error) {
	if p, err := netip.ParsePrefix(v); err == nil {
		return p.Addr(), nil
	}
	return netip.ParseAddr(v)
}

func (s *store) addDevicePublic4(dv *device, explicit string) error {
	pl := dv.metro.public4
	var blk netip.Prefix
	if explicit != "" {
		a, err := parseAddr(explicit)
		if err != nil || !a.Is4() {
			return fmt.Errorf("%q is not an IPv4 address", explicit)
		}
		blk = netip.PrefixFrom(a, 31).Masked()
		if err := pl.claim(blk, s.heldIn(pl)); err != nil {
			return err
		}
	} else {
		var err error
		if blk, err = pl.alloc(31); err != nil {
			return err
		}
	}
	r := &reservation{
		id: s.newUnusedID(), project: dv.project, typ: TypePublicIPv4, metro: dv.metro, facility: dv.facility,
		prefix: blk, createdAt: s.now(), management: true, deviceBlock: true, from: pl,
	}
	s.reservations[r.id] = r
	dv.project.reservations = append(dv.project.reservations, r)
	a := &assignment{id: s.newUnusedID(), res: r, device: dv, prefix: blk, createdAt: s.now(), management: true}
	r.assignments = append(r.assignments, a)
	dv.assignments = append(dv.assignments, a)
	return nil
}

// addDeviceFromProjectBlock gives the device a /31 (private IPv4) or /127
// (IPv6) from one of its project's blocks in its metro, creating a block
// (/25 or /56) when none has room.
func (s *store) addDeviceFromProjectBlock(dv *device, explicit, typ string) error {
	pr, m := dv.project, dv.metro
	blocks, metroPool, blockBits, devBits := pr.private4Blocks, m.private4, 25, 31
	if typ == TypePublicIPv6 {
		blocks, metroPool, blockBits, devBits = pr.pub6Blocks, m.pub6, 56, 127
	}
	var want netip.Prefix
	if explicit != "" {
		a, err := parseAddr(explicit)
		if err != nil || a.Is4() != (typ == TypePrivateIPv4) {
			return fmt.Errorf("%q is not an address of the right family", explicit)
		}
		want = netip.PrefixFrom(a, devBits).Masked()
	}
	var parent *reservation
	var blk netip.Prefix
	for _, b := range blocks[m] {
		if want.IsValid() {
			if b.prefix.Contains(want.Addr()) {
				if err := b.sub.claim(want, func(p netip.Prefix) bool {
					for _, a := range b.assignments {
						if a.prefix.Overlaps(p) {
							return true
						}
					}
					return false
				}); err != nil {
					return err
				}
				parent, blk = b, want
				break
			}
			continue
		}
		if p, err := b.sub.alloc(devBits); err == nil {
			parent, blk = b, p
			break
		}
	}
	if parent == nil {
		// A new project block.
		var pb netip.Prefix
		if want.IsValid() {
			pb = netip.PrefixFrom(want.Addr(), blockBits).Masked()
			if err := metroPool.claim(pb, s.heldIn(metroPool)); err != nil {
				return err
			}
		} else {
			var err error
			if pb, err = metroPool.alloc(blockBits); err != nil {
				return err
			}
		}
		parent = &reservation{
			id: s.newUnusedID(), project: pr, typ: typ, metro: m, prefix: pb, createdAt: s.now(),
			management: true, from: metroPool, sub: newPool(pb),
		}
		s.reservations[parent.id] = parent
		pr.reservations = append(pr.reservations, parent)
		blocks[m] = append(blocks[m], parent)
		if want.IsValid() {
			if err := parent.sub.claim(want, nil); err != nil {
				return err
			}
			blk = want
		} else {
			var err error
			if blk, err = parent.sub.alloc(devBits); err != nil {
				return err
			}
		}
	}
	a := &assignment{id: s.newUnusedID(), res: parent, device: dv, prefix: blk, createdAt: s.now(), management: true}
	parent.assignments = append(parent.assignments, a)
	dv.assignments = append(dv.assignments, a)
	return nil
}

// unassign removes an assignment; a device's management addresses go
// back to their pools.
func (s *store) unassign(a *assignment) {
	r := a.res
	r.assignments = slices.DeleteFunc(r.assignments, func(x *assignment) bool { return x == a })
	a.device.assignments = slices.DeleteFunc(a.device.assignments, func(x *assignment) bool { return x == a })
	delete(s.assignments, a.id)
	if a.management {
		if r.sub != nil {
			r.sub.release(a.prefix)
		}
		if r.deviceBlock {
			s.deleteReservation(r)
		}
	}
}

func (s *store) deleteReservation(r *reservation) {
	delete(s.reservations, r.id)
	r.project.reservations = slices.DeleteFunc(r.project.reservations, func(x *reservation) bool { return x == r })
	if r.from != nil {
		r.from.release(r.prefix)
	}
}

func (s *store) deleteDevice(dv *device) {
	for _, a := range slices.Clone(dv.assignments) {
		s.unassign(a)
	}
	for _, ss := range dv.sessions {
		delete(s.sessions, ss.id)
	}
	dv.sessions = nil
	delete(s.devices, dv.id)
	dv.project.devices = slices.DeleteFunc(dv.project.devices, func(x *device) bool { return x == dv })
}

// --- reservations ------------------------------------------------------

type reserveRequest struct {
	project    *project
	typ        string
	quantity   int
	metro      string
	facility   string
	address    string // seed only
	tags       []string
	details    string
	comments   string
	customdata map[string]any
	pending    bool // seed only: awaiting approval
	failOnApp  bool
	api        bool
}

func (s *store) addReservationSeed(r ReservationSeed) (*reservation, error) {
	pr, err := s.projectFor(r.Project)
	if err != nil {
		return nil, err
	}
	res, err := s.reserve(reserveRequest{
		project: pr, typ: r.Type, quantity: r.Quantity, metro: r.Metro, facility: r.Facility,
		address: r.Address, tags: r.Tags, details: r.Details, customdata: r.Customdata, pending: r.Pending,
	}, r.ID)
	if err != nil {
		return nil, err
	}
	for _, d := range r.AssignedTo {
		dv := s.devices[strings.ToLower(d)]
		if dv == nil {
			return nil, fmt.Errorf("device %q is not seeded", d)
		}
		if _, err := s.assign(dv, res.prefix.String()); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// reserve creates a reservation (the API's request, or a seed).
func (s *store) reserve(q reserveRequest, id string) (*reservation, error) {
	if q.typ == "" {
		if q.api {
			return nil, errf(422, "Type can't be blank")
		}
		q.typ = TypePublicIPv4
	}
	switch q.typ {
	case TypePublicIPv4, TypeGlobalIPv4, TypePublicIPv6:
	case TypePrivateIPv4:
		return nil, errf(422, "Private IPv4 blocks are allocated with devices and cannot be requested")
	case "vrf":
		return nil, errf(422, "VRF IP reservations are not supported by this emulator")
	default:
		return nil, errf(422, "Type %s is not one of public_ipv4, global_ipv4, public_ipv6", q.typ)
	}
	var explicit netip.Prefix
	if q.address != "" {
		p, err := netip.ParsePrefix(q.address)
		if err != nil {
			a, err2 := netip.ParseAddr(q.address)
			if err2 != nil {
				return nil, fmt.Errorf("address %q is neither an address nor a prefix", q.address)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		explicit = p.Masked()
		if q.quantity == 0 {
			q.quantity = 1 << (explicit.Addr().BitLen() - explicit.Bits())
		}
	}
	if q.quantity == 0 && !q.api {
		q.quantity = 1
	}
	if q.quantity <= 0 {
		return nil, errf(422, "Quantity must be greater than 0")
	}
	if bits.OnesCount(uint(q.quantity)) != 1 {
		return nil, errf(422, "Quantity must be a power of 2")
	}
	log2 := bits.TrailingZeros(uint(q.quantity))
	var m *metro
	var f *facility
	var pl *pool
	prefixBits := 0
	switch q.typ {
	case TypeGlobalIPv4:
		if q.metro != "" || q.facility != "" {
			return nil, errf(422, "Global IPv4 reservations cannot have a metro or facility")
		}
		if q.quantity > 4 {
			return nil, errf(422, "Global IPv4 reservations can have at most 4 addresses")
		}
		pl, prefixBits = s.global4, 32-log2
	case TypePublicIPv4:
		var err error
		if m, f, err = s.locate(q.metro, q.facility, !q.api); err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errf(422, "Metro or facility is required")
		}
		if q.quantity > 256 {
			return nil, errf(422, "Public IPv4 reservations can have at most 256 addresses")
		}
		pl, prefixBits = m.public4, 32-log2
	case TypePublicIPv6:
		var err error
		if m, f, err = s.locate(q.metro, q.facility, !q.api); err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errf(422, "Metro or facility is required")
		}
		pl, prefixBits = m.pub6, 128-log2
	}
	pr := q.project
	approval := q.pending
	if q.api && pr.approvalThreshold > 0 && q.quantity > pr.approvalThreshold {
		if q.failOnApp {
			return nil, errf(422, "Your request for %d addresses requires approval, and fail_on_approval_required is set", q.quantity)
		}
		approval = true
	}
	var blk netip.Prefix
	if explicit.IsValid() {
		if explicit.Bits() != prefixBits {
			return nil, fmt.Errorf("address %s does not hold quantity %d", explicit, q.quantity)
		}
		if err := pl.claim(explicit, s.heldIn(pl)); err != nil {
			return nil, err
		}
		blk = explicit
	} else {
		var err error
		if blk, err = pl.alloc(prefixBits); err != nil {
			return nil, errf(422, "No addresses available: %v", err)
		}
	}
	rid, err := s.idFor(id, "reservation", s.idTaken)
	if err != nil {
		pl.release(blk)
		return nil, err
	}
	now := s.now()
	r := &reservation{
		id: rid, project: pr, typ: q.typ, metro: m, facility: f, prefix: blk,
		tags: slices.Clone(q.tags), details: q.details, comments: q.comments, customdata: q.customdata,
		createdAt: now, approval: approval, from: pl,
	}
	if q.api {
		r.readyAt = now.Add(s.pendingFor)
	}
	if r.customdata == nil {
		r.customdata = map[string]any{}
	}
	s.reservations[rid] = r
	pr.reservations = append(pr.reservations, r)
	return r, nil
}

// assign assigns an address (or block) of one of the device's project's
// reservations to the device.
func (s *store) assign(dv *device, address string) (*assignment, error) {
	var want netip.Prefix
	if p, err := netip.ParsePrefix(address); err == nil {
		want = p
	} else if a, err := netip.ParseAddr(address); err == nil {
		want = netip.PrefixFrom(a, a.BitLen())
	} else {
		return nil, errf(422, "Address %s is not a valid IP address", address)
	}
	if want != want.Masked() {
		return nil, errf(422, "Address %s is not the start of a block", address)
	}
	var res *reservation
	for _, r := range dv.project.reservations {
		if !r.management && r.prefix.Contains(want.Addr()) && r.prefix.Bits() <= want.Bits() {
			res = r
			break
		}
	}
	if res == nil {
		return nil, errf(422, "Address %s is not reserved for the project", address)
	}
	if res.state(s.now()) != StateCreated {
		return nil, errf(422, "IP reservation %s is still pending", res.id)
	}
	if res.metro != nil && res.metro != dv.metro {
		return nil, errf(422, "IP reservation %s is in metro %s, the device is in metro %s", res.id, res.metro.code, dv.metro.code)
	}
	for _, a := range res.assignments {
		if a.prefix.Overlaps(want) {
			return nil, errf(422, "Address %s is already assigned to device %s", want, a.device.id)
		}
	}
	a := &assignment{id: s.newUnusedID(), res: res, device: dv, prefix: want, createdAt: s.now()}
	res.assignments = append(res.assignments, a)
	dv.assignments = append(dv.assignments, a)
	s.assignments[a.id] = a
	dv.updatedAt = s.now()
	return a, nil
}
