package emulator

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
)

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

// reserve creates a reservation (the API's request, or a seed): it checks
// the type and quantity, picks the pool, allocates the block (or claims the
// seed's address) and records the reservation.
func (s *store) reserve(q reserveRequest, id string) (*reservation, error) {
	if err := checkReserveType(&q); err != nil {
		return nil, err
	}
	explicit, err := normaliseQuantity(&q)
	if err != nil {
		return nil, err
	}
	m, f, pl, prefixBits, err := s.reservePool(q)
	if err != nil {
		return nil, err
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
	} else if blk, err = pl.alloc(prefixBits); err != nil {
		return nil, errf(422, "No addresses available: %v", err)
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

// checkReserveType refuses the types that cannot be requested; a seed
// without a type is public IPv4.
func checkReserveType(q *reserveRequest) error {
	if q.typ == "" {
		if q.api {
			return errf(422, "Type can't be blank")
		}
		q.typ = TypePublicIPv4
	}
	switch q.typ {
	case TypePublicIPv4, TypeGlobalIPv4, TypePublicIPv6:
		return nil
	case TypePrivateIPv4:
		return errf(422, "Private IPv4 blocks are allocated with devices and cannot be requested")
	case "vrf":
		return errf(422, "VRF IP reservations are not supported by this emulator")
	}
	return errf(422, "Type %s is not one of public_ipv4, global_ipv4, public_ipv6", q.typ)
}

// normaliseQuantity parses a seed's explicit address (whose size gives the
// quantity when none is set) and checks the quantity is a power of 2.
func normaliseQuantity(q *reserveRequest) (netip.Prefix, error) {
	var explicit netip.Prefix
	if q.address != "" {
		p, err := netip.ParsePrefix(q.address)
		if err != nil {
			a, err2 := netip.ParseAddr(q.address)
			if err2 != nil {
				return netip.Prefix{}, fmt.Errorf("address %q is neither an address nor a prefix", q.address)
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
		return netip.Prefix{}, errf(422, "Quantity must be greater than 0")
	}
	if bits.OnesCount(uint(q.quantity)) != 1 {
		return netip.Prefix{}, errf(422, "Quantity must be a power of 2")
	}
	return explicit, nil
}

// reservePool picks the location and the pool of a reservation of q.typ,
// and the prefix length of q.quantity addresses.
func (s *store) reservePool(q reserveRequest) (*metro, *facility, *pool, int, error) {
	log2 := bits.TrailingZeros(uint(q.quantity))
	if q.typ == TypeGlobalIPv4 {
		if q.metro != "" || q.facility != "" {
			return nil, nil, nil, 0, errf(422, "Global IPv4 reservations cannot have a metro or facility")
		}
		if q.quantity > 4 {
			return nil, nil, nil, 0, errf(422, "Global IPv4 reservations can have at most 4 addresses")
		}
		return nil, nil, s.global4, 32 - log2, nil
	}
	m, f, err := s.locate(q.metro, q.facility, !q.api)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	if m == nil {
		return nil, nil, nil, 0, errf(422, "Metro or facility is required")
	}
	if q.typ == TypePublicIPv6 {
		if m.noIPv6Reservations && q.api {
			return nil, nil, nil, 0, errf(422, "No public IPv6 addresses are available for reservation in metro %s", m.code)
		}
		return m, f, m.pub6, 128 - log2, nil
	}
	if q.quantity > 256 {
		return nil, nil, nil, 0, errf(422, "Public IPv4 reservations can have at most 256 addresses")
	}
	return m, f, m.public4, 32 - log2, nil
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
