package metal

import (
	"time"
	"unique"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
)

// resv is a cached reservation: the members the CCM reads (those
// reservationShape keeps of a listing), without the SDK's structs. An
// SDK IPReservation is a pointer per member, each its own allocation, and a
// struct per metro, facility and assignment with a map beside each: 3.5 KB a
// reservation, 35 MB of the heap at 10,000 Elastic IPs. Strings that repeat
// across reservations (the cluster and usage tags, the metro, the type and
// state) are interned. The cache hands out SDK values made from it
// (toSDK), so callers still read metalv1.IPReservation.
type resv struct {
	id, href, details, address, network string
	typ                                 metalv1.IPReservationType
	state                               string
	tags                                []string
	createdAt                           time.Time
	addressFamily, cidr                 int32
	flags                               resvFlags
	metro                               place
	facility                            place
	facilityMetro                       place
	assignments                         []assignment
}

// hostBits is the prefix length of one address of r's family.
func (r *resv) hostBits() int32 {
	if r.addressFamily == 6 || r.typ == metalv1.IPRESERVATIONTYPE_PUBLIC_IPV6 {
		return 128
	}
	return 32
}

// resvFlags say which optional members were present, and the booleans'
// values, so that toSDK gives back what the answer had (nil stays nil).
type resvFlags uint16

const (
	hasAddressFamily resvFlags = 1 << iota
	hasCidr
	hasPublic
	isPublic
	hasManagement
	isManagement
	hasCreatedAt
	hasMetro
	hasFacility
	hasFacilityMetro
)

func (f resvFlags) has(b resvFlags) bool { return f&b != 0 }

// place is a metro or facility as the CCM reads it.
type place struct{ id, code string }

// assignment is a reservation's assignment as the CCM reads it.
type assignment struct {
	id, href, address, network, assignedTo string
	state                                  metalv1.IPAssignmentState
	addressFamily, cidr                    int32
	flags                                  resvFlags // as a reservation's, with hasState and hasAssignedTo
	metro                                  place
}

// intern returns the one copy of s this process keeps.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

func flagIf(ok bool, f resvFlags) resvFlags {
	if ok {
		return f
	}
	return 0
}

func optFlags(i32a *int32, i32b *int32, public, management *bool) resvFlags {
	f := flagIf(i32a != nil, hasAddressFamily) | flagIf(i32b != nil, hasCidr)
	if public != nil {
		f |= hasPublic | flagIf(*public, isPublic)
	}
	if management != nil {
		f |= hasManagement | flagIf(*management, isManagement)
	}
	return f
}

// compactReservation keeps of r what the CCM reads.
func compactReservation(r *metalv1.IPReservation) *resv {
	c := &resv{
		id: r.GetId(), href: r.GetHref(), details: r.GetDetails(), address: r.GetAddress(), network: r.GetNetwork(),
		typ: metalv1.IPReservationType(intern(string(r.GetType()))), state: intern(r.GetState()),
		addressFamily: r.GetAddressFamily(), cidr: r.GetCidr(),
		flags: optFlags(r.AddressFamily, r.Cidr, r.Public, r.Management),
	}
	if len(r.Tags) > 0 {
		c.tags = make([]string, len(r.Tags))
		for i, t := range r.Tags {
			c.tags[i] = intern(t)
		}
	}
	if r.CreatedAt != nil {
		c.flags |= hasCreatedAt
		c.createdAt = *r.CreatedAt
	}
	if m := r.Metro; m != nil {
		c.flags |= hasMetro
		c.metro = place{intern(m.GetId()), intern(m.GetCode())}
	}
	if f := r.Facility; f != nil {
		c.flags |= hasFacility
		c.facility = place{intern(f.GetId()), intern(f.GetCode())}
		if m := f.Metro; m != nil {
			c.flags |= hasFacilityMetro
			c.facilityMetro = place{intern(m.GetId()), intern(m.GetCode())}
		}
	}
	if len(r.Assignments) > 0 {
		c.assignments = make([]assignment, len(r.Assignments))
		for i := range r.Assignments {
			c.assignments[i] = compactAssignment(&r.Assignments[i])
		}
	}
	return c
}

// An assignment's flags reuse resvFlags: hasCreatedAt for a state, and
// hasFacility for an assigned_to.
const (
	hasState      = hasCreatedAt
	hasAssignedTo = hasFacility
)

func compactAssignment(a *metalv1.IPAssignment) assignment {
	c := assignment{
		id: a.GetId(), href: a.GetHref(), address: a.GetAddress(), network: a.GetNetwork(),
		addressFamily: a.GetAddressFamily(), cidr: a.GetCidr(),
		flags: optFlags(a.AddressFamily, a.Cidr, a.Public, a.Management),
	}
	if a.State != nil {
		c.flags |= hasState
		c.state = metalv1.IPAssignmentState(intern(string(*a.State)))
	}
	if a.AssignedTo != nil {
		c.flags |= hasAssignedTo
		c.assignedTo = a.AssignedTo.GetHref()
	}
	if m := a.Metro; m != nil {
		c.flags |= hasMetro
		c.metro = place{intern(m.GetId()), intern(m.GetCode())}
	}
	return c
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optInt32(ok bool, v int32) *int32 {
	if !ok {
		return nil
	}
	return &v
}

func optBool(f, has, is resvFlags) *bool {
	if !f.has(has) {
		return nil
	}
	v := f.has(is)
	return &v
}

// toSDK is the reservation as the SDK decoded it, less what the listing's
// trim drops: a fresh value the caller may keep and change.
func (c *resv) toSDK() metalv1.IPReservation {
	r := metalv1.IPReservation{
		Id: strPtr(c.id), Href: strPtr(c.href), Details: strPtr(c.details), Address: strPtr(c.address), Network: strPtr(c.network),
		Type: c.typ, State: strPtr(c.state),
		AddressFamily: optInt32(c.flags.has(hasAddressFamily), c.addressFamily), Cidr: optInt32(c.flags.has(hasCidr), c.cidr),
		Public: optBool(c.flags, hasPublic, isPublic), Management: optBool(c.flags, hasManagement, isManagement),
	}
	if len(c.tags) > 0 {
		r.Tags = append([]string(nil), c.tags...)
	}
	if c.flags.has(hasCreatedAt) {
		t := c.createdAt
		r.CreatedAt = &t
	}
	if c.flags.has(hasMetro) {
		r.Metro = &metalv1.IPReservationMetro{Id: strPtr(c.metro.id), Code: strPtr(c.metro.code)}
	}
	if c.flags.has(hasFacility) {
		r.Facility = &metalv1.IPReservationFacility{Id: strPtr(c.facility.id), Code: strPtr(c.facility.code)}
		if c.flags.has(hasFacilityMetro) {
			r.Facility.Metro = &metalv1.DeviceMetro{Id: strPtr(c.facilityMetro.id), Code: strPtr(c.facilityMetro.code)}
		}
	}
	if len(c.assignments) > 0 {
		r.Assignments = make([]metalv1.IPAssignment, len(c.assignments))
		for i, a := range c.assignments {
			r.Assignments[i] = a.toSDK()
		}
	}
	return r
}

func (a assignment) toSDK() metalv1.IPAssignment {
	out := metalv1.IPAssignment{
		Id: strPtr(a.id), Href: strPtr(a.href), Address: strPtr(a.address), Network: strPtr(a.network),
		AddressFamily: optInt32(a.flags.has(hasAddressFamily), a.addressFamily), Cidr: optInt32(a.flags.has(hasCidr), a.cidr),
		Public: optBool(a.flags, hasPublic, isPublic), Management: optBool(a.flags, hasManagement, isManagement),
	}
	if a.flags.has(hasState) {
		s := a.state
		out.State = &s
	}
	if a.flags.has(hasAssignedTo) {
		out.AssignedTo = &metalv1.Href{Href: a.assignedTo}
	}
	if a.flags.has(hasMetro) {
		out.Metro = &metalv1.IPAssignmentMetro{Id: strPtr(a.metro.id), Code: strPtr(a.metro.code)}
	}
	return out
}
