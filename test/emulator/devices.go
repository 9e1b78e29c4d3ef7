package emulator

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

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
