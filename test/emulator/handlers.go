package emulator

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"
)

// --- lookups (the caller holds the store lock) ---------------------------

func (c *call) project(id string) (*project, error) {
	p := c.e.store.projectByID[strings.ToLower(id)]
	if p == nil || !isUUID(id) {
		return nil, errNotFound
	}
	if !c.tok.canUse(p) {
		return nil, errf(http.StatusForbidden, "You are not authorized to view this project")
	}
	return p, nil
}

func (c *call) device(id string) (*device, error) {
	d := c.e.store.devices[strings.ToLower(id)]
	if d == nil || !isUUID(id) {
		return nil, errNotFound
	}
	if !c.tok.canUse(d.project) {
		return nil, errf(http.StatusForbidden, "You are not authorized to view this device")
	}
	return d, nil
}

func (c *call) includes() includes {
	inc := includes{}
	for _, v := range c.r.URL.Query()["include"] {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				inc[p] = true
			}
		}
	}
	return inc
}

// decode reads a JSON request body into v; an empty body is {}.
func (c *call) decode(v any) error {
	b, err := io.ReadAll(io.LimitReader(c.r.Body, 1<<20))
	if err != nil {
		return errf(http.StatusUnprocessableEntity, "Could not read the request body: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		b = []byte("{}")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errf(http.StatusUnprocessableEntity, "Invalid JSON in the request body: %v", err)
	}
	return nil
}

// paginate cuts one page out of n items and describes it the way the API
// does: page (from 1) and per_page (1..1000) query parameters, and a meta
// object with links to the first, previous, current, next and last pages.
func (c *call) paginate(n, defaultPerPage int) (start, end int, meta *metalv1.Meta) {
	q := c.r.URL.Query()
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per < 1 {
		per = defaultPerPage
	}
	per = min(per, 1000)
	last := max(1, (n+per-1)/per)
	start = min((page-1)*per, n)
	end = min(start+per, n)
	link := func(p int) *metalv1.Href {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("page", strconv.Itoa(p))
		v.Set("per_page", strconv.Itoa(per))
		return &metalv1.Href{Href: c.r.URL.Path + "?" + v.Encode()}
	}
	meta = &metalv1.Meta{
		First: link(1), Last: link(last), Self: link(page),
		Total: int32p(n), CurrentPage: int32p(page), LastPage: int32p(last),
	}
	if page < last {
		meta.Next = link(page + 1)
	}
	if page > 1 {
		meta.Previous = link(min(page-1, last))
	}
	return start, end, meta
}

// --- devices -------------------------------------------------------------

func (c *call) getDevice() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, err := c.device(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	return result{http.StatusOK, s.renderDevice(d, c.includes())}, nil
}

func (c *call) listProjectDevices() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := c.project(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	q := c.r.URL.Query()
	hostname := strings.ToLower(q.Get("hostname"))
	tag, metroCode, facCode := q.Get("tag"), strings.ToLower(q.Get("metro")), strings.ToLower(q.Get("facility"))
	search := strings.ToLower(q.Get("search"))
	devs := p.devices
	if hostname != "" || tag != "" || metroCode != "" || facCode != "" || search != "" {
		devs = make([]*device, 0, len(p.devices))
		for _, d := range p.devices {
			if hostname != "" && !strings.Contains(strings.ToLower(d.hostname), hostname) ||
				tag != "" && !slices.Contains(d.tags, tag) ||
				metroCode != "" && d.metro.code != metroCode ||
				facCode != "" && (d.facility == nil || d.facility.code != facCode) ||
				search != "" && !deviceMatches(d, search) {
				continue
			}
			devs = append(devs, d)
		}
	}
	start, end, meta := c.paginate(len(devs), 10)
	inc := c.includes()
	out := &metalv1.DeviceList{Devices: make([]metalv1.Device, 0, end-start), Meta: meta}
	for _, d := range devs[start:end] {
		out.Devices = append(out.Devices, s.renderDevice(d, inc))
	}
	return result{http.StatusOK, out}, nil
}

func deviceMatches(d *device, search string) bool {
	if strings.Contains(strings.ToLower(d.hostname), search) || strings.Contains(d.plan, search) ||
		strings.HasPrefix(d.id, search) || d.facility != nil && d.facility.code == search {
		return true
	}
	for _, t := range d.tags {
		if strings.Contains(strings.ToLower(t), search) {
			return true
		}
	}
	for _, a := range d.assignments {
		if a.address().String() == search {
			return true
		}
	}
	return false
}

// --- BGP -----------------------------------------------------------------

func (c *call) getBGPConfig() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := c.project(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	return result{http.StatusOK, s.renderBGPConfig(p)}, nil
}

// md5Pattern is BgpConfigRequestInput.md5's rule: 10-20 letters and digits
// with at least one lower-case letter, one upper-case letter and one digit.
var md5Pattern = regexp.MustCompile(`^[a-zA-Z\d]{10,20}$`)

func validMD5(s string) bool {
	return md5Pattern.MatchString(s) && strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz") &&
		strings.ContainsAny(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.ContainsAny(s, "0123456789")
}

func (c *call) requestBGPConfig() (result, error) {
	var in struct {
		ASN            *int64  `json:"asn"`
		DeploymentType *string `json:"deployment_type"`
		MD5            *string `json:"md5"`
		UseCase        *string `json:"use_case"`
	}
	if err := c.decode(&in); err != nil {
		return result{}, err
	}
	s := c.e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := c.project(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	var problems []string
	if in.DeploymentType == nil || (*in.DeploymentType != "local" && *in.DeploymentType != "global") {
		problems = append(problems, "Deployment type must be local or global")
	}
	if in.ASN == nil {
		problems = append(problems, "Asn can't be blank")
	} else if *in.ASN < 0 || *in.ASN > 4294967295 {
		problems = append(problems, "Asn must be between 0 and 4294967295")
	}
	md5 := ""
	if in.MD5 != nil {
		md5 = *in.MD5
	}
	if md5 != "" && !validMD5(md5) {
		problems = append(problems, "Md5 must be 10-20 letters and digits with at least one lower-case letter, one upper-case letter and one digit")
	}
	if len(problems) > 0 {
		return result{}, &apiError{status: http.StatusUnprocessableEntity, msg: strings.Join(problems, ", ")}
	}
	if p.bgp != nil && p.bgp.status != "disabled" {
		return result{}, errf(http.StatusUnprocessableEntity, "BGP is already %s for this project", p.bgp.status)
	}
	status := "enabled"
	if *in.DeploymentType == "global" {
		status = "requested" // global BGP is reviewed by Equinix
	}
	if err := s.setBGP(p, BGPConfigSeed{ASN: *in.ASN, MD5: md5, DeploymentType: *in.DeploymentType, Status: status}); err != nil {
		return result{}, errf(http.StatusUnprocessableEntity, "%v", err)
	}
	if in.UseCase != nil {
		p.bgp.useCase = *in.UseCase
	}
	return result{status: http.StatusNoContent}, nil
}

func (c *call) createBGPSession() (result, error) {
	var in struct {
		AddressFamily *string `json:"address_family"`
		DefaultRoute  *bool   `json:"default_route"`
	}
	if err := c.decode(&in); err != nil {
		return result{}, err
	}
	s := c.e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := c.device(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	fam := "ipv4"
	if in.AddressFamily != nil {
		fam = *in.AddressFamily
	}
	if fam != "ipv4" && fam != "ipv6" {
		return result{}, errf(http.StatusUnprocessableEntity, "Address family must be ipv4 or ipv6")
	}
	if b := d.project.bgp; b == nil || b.status != "enabled" {
		return result{}, errf(http.StatusUnprocessableEntity, "BGP is not enabled for the project of device %s", d.id)
	}
	for _, ss := range d.sessions {
		if ss.family == fam {
			return result{}, errf(http.StatusUnprocessableEntity, "Device %s already has session for address family %s", d.id, fam)
		}
	}
	ss := &bgpSession{id: s.newUnusedID(), device: d, family: fam, createdAt: s.now()}
	if in.DefaultRoute != nil {
		ss.defaultRoute = *in.DefaultRoute
	}
	d.sessions = append(d.sessions, ss)
	s.sessions[ss.id] = ss
	return result{http.StatusCreated, renderSession(ss, true)}, nil
}

func (c *call) listBGPSessions() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, err := c.device(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	out := &metalv1.BgpSessionList{BgpSessions: make([]metalv1.BgpSession, 0, len(d.sessions))}
	for _, ss := range d.sessions {
		out.BgpSessions = append(out.BgpSessions, renderSession(ss, false))
	}
	return result{http.StatusOK, out}, nil
}

func (c *call) getBGPNeighbors() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, err := c.device(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	return result{http.StatusOK, s.renderNeighbors(d)}, nil
}

// --- IP reservations and assignments -----------------------------------------

var reservationTypes = []string{TypeGlobalIPv4, TypePrivateIPv4, TypePublicIPv4, TypePublicIPv6, "vrf"}

func (c *call) listIPReservations() (result, error) {
	types := map[string]bool{}
	for _, v := range c.r.URL.Query()["types"] {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if !slices.Contains(reservationTypes, t) {
				return result{}, errf(http.StatusUnprocessableEntity, "Types must be among %s", strings.Join(reservationTypes, ", "))
			}
			types[t] = true
		}
	}
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := c.project(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	rs := p.reservations
	if len(types) > 0 {
		rs = make([]*reservation, 0, len(p.reservations))
		for _, r := range p.reservations {
			if types[r.typ] {
				rs = append(rs, r)
			}
		}
	}
	start, end, meta := c.paginate(len(rs), 250)
	inc := c.includes()
	out := &metalv1.IPReservationList{IpAddresses: make([]metalv1.IPReservationListIpAddressesInner, 0, end-start), Meta: meta}
	for _, r := range rs[start:end] {
		out.IpAddresses = append(out.IpAddresses, metalv1.IPReservationListIpAddressesInner{IPReservation: s.renderReservation(r, inc)})
	}
	return result{http.StatusOK, out}, nil
}

func (c *call) requestIPReservation() (result, error) {
	var in struct {
		Type                   *string        `json:"type"`
		Quantity               *int           `json:"quantity"`
		Metro                  *string        `json:"metro"`
		Facility               *string        `json:"facility"`
		Tags                   []string       `json:"tags"`
		Details                *string        `json:"details"`
		Comments               *string        `json:"comments"`
		Customdata             map[string]any `json:"customdata"`
		FailOnApprovalRequired *bool          `json:"fail_on_approval_required"`
		VrfID                  *string        `json:"vrf_id"`
	}
	if err := c.decode(&in); err != nil {
		return result{}, err
	}
	s := c.e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := c.project(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	if in.VrfID != nil {
		return result{}, errf(http.StatusUnprocessableEntity, "VRF IP reservations are not supported by this emulator")
	}
	if in.Quantity == nil {
		return result{}, errf(http.StatusUnprocessableEntity, "Quantity can't be blank")
	}
	q := reserveRequest{project: p, quantity: *in.Quantity, tags: in.Tags, customdata: in.Customdata, api: true}
	for dst, src := range map[*string]*string{&q.typ: in.Type, &q.metro: in.Metro, &q.facility: in.Facility, &q.details: in.Details, &q.comments: in.Comments} {
		if src != nil {
			*dst = *src
		}
	}
	if in.FailOnApprovalRequired != nil {
		q.failOnApp = *in.FailOnApprovalRequired
	}
	r, err := s.reserve(q, "")
	if err != nil {
		return result{}, err
	}
	return result{http.StatusCreated, s.renderReservation(r, c.includes())}, nil
}

func (c *call) lookupIP(id string) (*reservation, *assignment, error) {
	s := c.e.store
	id = strings.ToLower(id)
	r, a := s.reservations[id], s.assignments[id]
	var p *project
	switch {
	case !isUUID(id):
		return nil, nil, errNotFound
	case r != nil:
		p = r.project
	case a != nil:
		p = a.res.project
	default:
		return nil, nil, errNotFound
	}
	if !c.tok.canUse(p) {
		return nil, nil, errf(http.StatusForbidden, "You are not authorized to view this IP address")
	}
	return r, a, nil
}

func (c *call) getIP() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, a, err := c.lookupIP(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	inc := c.includes()
	if r != nil {
		return result{http.StatusOK, s.renderReservation(r, inc)}, nil
	}
	return result{http.StatusOK, s.renderAssignment(a, inc, inc["parent_block"])}, nil
}

func (c *call) deleteIP() (result, error) {
	s := c.e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	r, a, err := c.lookupIP(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	if a != nil {
		if a.management {
			return result{}, errf(http.StatusUnprocessableEntity, "Management addresses of a device cannot be unassigned")
		}
		a.device.updatedAt = s.now()
		s.unassign(a)
		return result{status: http.StatusNoContent}, nil
	}
	if r.management {
		return result{}, errf(http.StatusUnprocessableEntity, "Management blocks cannot be deleted")
	}
	if len(r.assignments) > 0 {
		return result{}, errf(http.StatusUnprocessableEntity, "IP reservation %s has %d assignment(s); unassign them first", r.id, len(r.assignments))
	}
	s.deleteReservation(r)
	return result{status: http.StatusNoContent}, nil
}

func (c *call) assignIP() (result, error) {
	var in struct {
		Address    *string        `json:"address"`
		Customdata map[string]any `json:"customdata"`
	}
	if err := c.decode(&in); err != nil {
		return result{}, err
	}
	s := c.e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := c.device(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	if in.Address == nil || *in.Address == "" {
		return result{}, errf(http.StatusUnprocessableEntity, "Address can't be blank")
	}
	a, err := s.assign(d, *in.Address)
	if err != nil {
		return result{}, err
	}
	inc := c.includes()
	return result{http.StatusCreated, s.renderAssignment(a, inc, inc["parent_block"])}, nil
}

func (c *call) listDeviceIPs() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, err := c.device(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	inc := c.includes()
	out := &metalv1.IPAssignmentList{IpAddresses: make([]metalv1.IPAssignment, 0, len(d.assignments))}
	for _, a := range d.assignments {
		out.IpAddresses = append(out.IpAddresses, s.renderAssignment(a, inc, inc["parent_block"]))
	}
	return result{http.StatusOK, out}, nil
}

// --- projects and locations -------------------------------------------------

func (c *call) getProject() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := c.project(c.r.PathValue("id"))
	if err != nil {
		return result{}, err
	}
	return result{http.StatusOK, renderProject(p, true)}, nil
}

func (c *call) listMetros() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := &metalv1.MetroList{Metros: make([]metalv1.Metro, 0, len(s.metros))}
	for _, m := range s.metros {
		out.Metros = append(out.Metros, *renderMetro(m))
	}
	return result{http.StatusOK, out}, nil
}

func (c *call) getMetro() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	id := strings.ToLower(c.r.PathValue("id"))
	m := s.metroByID[id]
	if m == nil {
		m = s.metroByCode[id]
	}
	if m == nil {
		return result{}, errNotFound
	}
	return result{http.StatusOK, renderMetro(m)}, nil
}

func (c *call) listFacilities() (result, error) {
	s := c.e.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := &metalv1.FacilityList{Facilities: make([]metalv1.Facility, 0, len(s.facilities))}
	for _, f := range s.facilities {
		out.Facilities = append(out.Facilities, *renderFacility(f))
	}
	return result{http.StatusOK, out}, nil
}
