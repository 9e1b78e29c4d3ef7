package emulator

import (
	"maps"
	"slices"
	"time"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"
)

// BasePath is where the API is served, as on api.equinix.com.
const BasePath = "/metal/v1"

// includes is the parsed include query parameter.
type includes map[string]bool

func href(parts ...string) string {
	h := BasePath
	for _, p := range parts {
		h += "/" + p
	}
	return h
}

func ptr[T any](v T) *T { return &v }

func int32p(v int) *int32 { return ptr(int32(v)) }

func timep(t time.Time) *time.Time {
	t = t.UTC().Truncate(time.Second)
	return &t
}

func renderMetro(m *metro) *metalv1.Metro {
	return &metalv1.Metro{Id: ptr(m.id), Code: ptr(m.code), Name: ptr(m.name), Country: ptr(m.country)}
}

func renderDeviceMetro(m *metro) *metalv1.DeviceMetro {
	return &metalv1.DeviceMetro{Id: ptr(m.id), Code: ptr(m.code), Name: ptr(m.name), Country: ptr(m.country)}
}

var facilityFeatures = []metalv1.FacilityFeaturesInner{
	metalv1.FACILITYFEATURESINNER_BAREMETAL, metalv1.FACILITYFEATURESINNER_BACKEND_TRANSFER,
	metalv1.FACILITYFEATURESINNER_LAYER_2, metalv1.FACILITYFEATURESINNER_GLOBAL_IPV4,
}

func renderFacility(f *facility) *metalv1.Facility {
	return &metalv1.Facility{
		Id: ptr(f.id), Code: ptr(f.code), Name: ptr(f.name),
		Features: slices.Clone(facilityFeatures), IpRanges: []string{f.metro.public4.prefix.String(), f.metro.pub6.prefix.String()},
		Metro: renderDeviceMetro(f.metro),
	}
}

func renderProject(p *project, full bool) *metalv1.Project {
	if !full {
		return &metalv1.Project{Href: ptr(href("projects", p.id))}
	}
	out := &metalv1.Project{
		Id: ptr(p.id), Name: ptr(p.name), Href: ptr(href("projects", p.id)),
		CreatedAt: timep(p.createdAt), UpdatedAt: timep(p.createdAt),
		BackendTransferEnabled: ptr(false), Type: metalv1.PROJECTTYPE_DEFAULT.Ptr(),
		Customdata: map[string]interface{}{}, Tags: []string{},
	}
	if p.bgp != nil {
		out.BgpConfig = &metalv1.Href{Href: href("projects", p.id, "bgp-config")}
	}
	return out
}

func (s *store) renderAssignment(a *assignment, inc includes, parentFull bool) metalv1.IPAssignment {
	r := a.res
	out := metalv1.IPAssignment{
		Id:            ptr(a.id),
		Href:          ptr(href("ips", a.id)),
		Address:       ptr(a.address().String()),
		AddressFamily: int32p(r.family()),
		Cidr:          int32p(a.prefix.Bits()),
		Netmask:       ptr(netmask(a.prefix)),
		Network:       ptr(a.prefix.Masked().Addr().String()),
		Gateway:       ptr(a.gateway().String()),
		Public:        ptr(r.typ != TypePrivateIPv4),
		Management:    ptr(a.management),
		Manageable:    ptr(!a.management),
		Enabled:       ptr(true),
		GlobalIp:      ptr(r.typ == TypeGlobalIPv4),
		AssignedTo:    &metalv1.Href{Href: href("devices", a.device.id)},
		CreatedAt:     timep(a.createdAt),
		Type:          metalv1.IPASSIGNMENTTYPE_IP_ASSIGNMENT.Ptr(),
	}
	if m := a.device.metro; m != nil {
		out.Metro = &metalv1.IPAssignmentMetro{Id: ptr(m.id), Code: ptr(m.code), Name: ptr(m.name), Country: ptr(m.country)}
	}
	pb := &metalv1.ParentBlock{Href: ptr(href("ips", r.id))}
	if parentFull {
		pb.Network = ptr(r.prefix.Masked().Addr().String())
		pb.Cidr = int32p(r.prefix.Bits())
		pb.Netmask = ptr(netmask(r.prefix))
	}
	out.ParentBlock = pb
	return out
}

func (s *store) renderReservation(r *reservation, inc includes) *metalv1.IPReservation {
	now := s.now()
	out := &metalv1.IPReservation{
		Id:            ptr(r.id),
		Href:          ptr(href("ips", r.id)),
		Type:          metalv1.IPReservationType(r.typ),
		Address:       ptr(r.prefix.Masked().Addr().String()),
		AddressFamily: int32p(r.family()),
		Cidr:          int32p(r.prefix.Bits()),
		Netmask:       ptr(netmask(r.prefix)),
		Network:       ptr(r.prefix.Masked().Addr().String()),
		Gateway:       ptr(r.prefix.Masked().Addr().String()),
		Public:        ptr(r.typ != TypePrivateIPv4),
		GlobalIp:      ptr(r.typ == TypeGlobalIPv4),
		Management:    ptr(r.management),
		Manageable:    ptr(!r.management),
		Addon:         ptr(!r.management),
		Bill:          ptr(!r.management),
		Enabled:       ptr(true),
		Available:     ptr(href("ips", r.id, "available")),
		State:         ptr(r.state(now)),
		Tags:          slices.Clone(r.tags),
		Customdata:    maps.Clone(r.customdata),
		CreatedAt:     timep(r.createdAt),
		Project:       renderProject(r.project, inc["project"]),
		ProjectLite:   &metalv1.Href{Href: href("projects", r.project.id)},
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if out.Customdata == nil {
		out.Customdata = map[string]interface{}{}
	}
	if r.details != "" {
		out.Details = ptr(r.details)
	}
	if r.prefix.Bits() < r.prefix.Addr().BitLen()-1 {
		// Blocks larger than a /31 reserve their first address as the gateway.
		out.Gateway = ptr(nthAddr(r.prefix, 1).String())
	}
	if r.metro != nil {
		out.Metro = &metalv1.IPReservationMetro{Id: ptr(r.metro.id), Code: ptr(r.metro.code), Name: ptr(r.metro.name), Country: ptr(r.metro.country)}
	}
	if r.facility != nil {
		f := renderFacility(r.facility)
		out.Facility = &metalv1.IPReservationFacility{Id: f.Id, Code: f.Code, Name: f.Name, Features: f.Features, IpRanges: f.IpRanges, Metro: f.Metro}
	}
	out.Assignments = make([]metalv1.IPAssignment, 0, len(r.assignments))
	for _, a := range r.assignments {
		if inc["assignments"] {
			out.Assignments = append(out.Assignments, s.renderAssignment(a, nil, inc["assignments.parent_block"]))
		} else {
			out.Assignments = append(out.Assignments, metalv1.IPAssignment{Href: ptr(href("ips", a.id))})
		}
	}
	return out
}

func (s *store) renderDevice(d *device, inc includes) metalv1.Device {
	state := metalv1.DeviceState(d.state)
	out := metalv1.Device{
		Id:            ptr(d.id),
		ShortId:       ptr(d.id[:8]),
		Href:          ptr(href("devices", d.id)),
		Hostname:      ptr(d.hostname),
		State:         &state,
		Tags:          slices.Clone(d.tags),
		CreatedAt:     timep(d.createdAt),
		UpdatedAt:     timep(d.updatedAt),
		BillingCycle:  ptr("hourly"),
		AlwaysPxe:     ptr(false),
		Locked:        ptr(false),
		SpotInstance:  ptr(false),
		NetworkFrozen: ptr(false),
		BondingMode:   int32p(5),
		Customdata:    map[string]interface{}{},
		SshKeys:       []metalv1.Href{},
		Volumes:       []metalv1.Href{},
		Project:       renderProject(d.project, inc["project"]),
		ProjectLite:   &metalv1.DeviceProjectLite{Href: href("projects", d.project.id)},
		Metro:         renderDeviceMetro(d.metro),
		Plan: &metalv1.Plan{
			Id: ptr(planID(d.plan)), Slug: ptr(d.plan), Name: ptr(d.plan), Class: ptr(d.plan),
			Line: ptr("baremetal"), Type: metalv1.PLANTYPE_STANDARD.Ptr(),
		},
		OperatingSystem: &metalv1.OperatingSystem{
			Id: ptr("a3729923-fdc4-4e85-a972-aafbad3695db"), Slug: ptr("ubuntu_24_04"), Name: ptr("Ubuntu 24.04 LTS"),
			Distro: ptr("ubuntu"), Version: ptr("24.04"),
		},
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if d.facility != nil {
		out.Facility = renderFacility(d.facility)
		out.Sos = ptr("sos." + d.facility.code + ".platformequinix.com")
	}
	parentFull := inc["ip_addresses.parent_block"]
	out.IpAddresses = make([]metalv1.IPAssignment, 0, len(d.assignments))
	for _, a := range d.assignments {
		out.IpAddresses = append(out.IpAddresses, s.renderAssignment(a, nil, parentFull))
	}
	return out
}

// planID makes a stable UUID-shaped ID for a plan slug.
func planID(slug string) string {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(slug); i++ {
		h ^= uint64(slug[i])
		h *= 1099511628211
	}
	g := h*0x9e3779b97f4a7c15 + 1
	b := make([]byte, 0, 16)
	for i := 0; i < 8; i++ {
		b = append(b, byte(h>>(8*i)))
	}
	for i := 0; i < 8; i++ {
		b = append(b, byte(g>>(8*i)))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

func (s *store) renderBGPConfig(p *project) *metalv1.BgpConfig {
	c := p.bgp
	if c == nil {
		return &metalv1.BgpConfig{}
	}
	dt := metalv1.BgpConfigDeploymentType(c.deploymentType)
	st := metalv1.BgpConfigStatus(c.status)
	out := &metalv1.BgpConfig{
		Id: ptr(c.id), Href: ptr(href("bgp-configs", c.id)), Asn: ptr(c.asn), DeploymentType: &dt, Status: &st,
		MaxPrefix: int32p(c.maxPrefix), CreatedAt: timep(c.createdAt), RequestedAt: timep(c.requestedAt),
		Project: &metalv1.Href{Href: href("projects", p.id)}, Ranges: []metalv1.GlobalBgpRange{},
		Sessions: []metalv1.BgpSession{},
	}
	if c.md5 != "" {
		out.Md5 = *metalv1.NewNullableString(ptr(c.md5))
	}
	for _, d := range p.devices {
		for _, ss := range d.sessions {
			out.Sessions = append(out.Sessions, renderSession(ss, false))
		}
	}
	return out
}

func renderSession(ss *bgpSession, justCreated bool) metalv1.BgpSession {
	status := "up,up"
	if justCreated {
		status = "unknown"
	}
	return metalv1.BgpSession{
		Id: ptr(ss.id), Href: ptr(href("bgp", "sessions", ss.id)),
		AddressFamily: metalv1.BgpSessionAddressFamily(ss.family),
		DefaultRoute:  ptr(ss.defaultRoute), Status: ptr(status),
		Device:    &metalv1.Href{Href: href("devices", ss.device.id)},
		CreatedAt: timep(ss.createdAt), UpdatedAt: timep(ss.createdAt),
		LearnedRoutes: []string{},
	}
}

// renderNeighbors is the BGP neighbour data of a device: one entry per
// address family with a session.
func (s *store) renderNeighbors(d *device) *metalv1.BgpSessionNeighbors {
	out := &metalv1.BgpSessionNeighbors{BgpNeighbors: []metalv1.BgpNeighborData{}}
	for _, ss := range d.sessions {
		fam := 4
		if ss.family == "ipv6" {
			fam = 6
		}
		n := BGPNeighborSeed{AddressFamily: fam}
		for _, seeded := range d.neighbors {
			if seeded.AddressFamily == fam {
				n = seeded
			}
		}
		asn, md5 := int64(65000), ""
		if d.project.bgp != nil {
			asn, md5 = d.project.bgp.asn, d.project.bgp.md5
		}
		if n.MD5Password != "" {
			md5 = n.MD5Password
		}
		if n.CustomerAS == 0 {
			n.CustomerAS = int(asn)
		}
		if n.PeerAS == 0 {
			n.PeerAS = 65530
		}
		if len(n.PeerIPs) == 0 {
			n.PeerIPs = []string{"169.254.255.1", "169.254.255.2"}
			if fam == 6 {
				n.PeerIPs = []string{"fc00::e", "fc00::f"}
			}
		}
		var routesIn []metalv1.BgpRoute
		for _, a := range d.assignments {
			if !a.management {
				continue
			}
			r := a.res
			if fam == 4 && r.typ == TypePrivateIPv4 || fam == 6 && r.typ == TypePublicIPv6 {
				if n.CustomerIP == "" {
					n.CustomerIP = a.address().String()
				}
				routesIn = append(routesIn, metalv1.BgpRoute{Route: ptr(r.prefix.String()), Exact: ptr(false)})
			}
		}
		for _, r := range d.project.reservations {
			if r.management || r.family() != fam || (r.metro != nil && r.metro != d.metro) {
				continue
			}
			routesIn = append(routesIn, metalv1.BgpRoute{Route: ptr(r.prefix.String()), Exact: ptr(true)})
		}
		if routesIn == nil {
			routesIn = []metalv1.BgpRoute{}
		}
		routesOut := []metalv1.BgpRoute{}
		if ss.defaultRoute {
			def := "0.0.0.0/0"
			if fam == 6 {
				def = "::/0"
			}
			routesOut = append(routesOut, metalv1.BgpRoute{Route: ptr(def), Exact: ptr(true)})
		}
		multihop := true
		if n.Multihop != nil {
			multihop = *n.Multihop
		}
		nd := metalv1.BgpNeighborData{
			AddressFamily: int32p(fam), CustomerAs: int32p(n.CustomerAS), PeerAs: int32p(n.PeerAS),
			PeerIps: slices.Clone(n.PeerIPs), Md5Enabled: ptr(md5 != ""), Multihop: ptr(multihop),
			RoutesIn: routesIn, RoutesOut: routesOut,
		}
		if n.CustomerIP != "" {
			nd.CustomerIp = ptr(n.CustomerIP)
		}
		if md5 != "" {
			nd.Md5Password = ptr(md5)
		}
		out.BgpNeighbors = append(out.BgpNeighbors, nd)
	}
	return out
}
