package emulator

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// The store's side of seeding: a Seed's metros, facilities, projects and
// BGP configs become state (devices and reservations are in devices.go and
// reservations.go).

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
	mt := &metro{id: id, code: code, name: m.Name, country: m.Country, noIPv6Reservations: m.NoIPv6Reservations}
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
