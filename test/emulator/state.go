package emulator

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
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
	// noIPv6Reservations: public_ipv6 requests are refused here.
	noIPv6Reservations bool
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
