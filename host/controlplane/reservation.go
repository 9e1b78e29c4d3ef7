package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
)

// reservation is the control-plane EIP as last read from Equinix: the
// facts a decision is made on.
type reservation struct {
	id, address string
	// metro is the reservation's metro code ("" for one bound to none):
	// Equinix assigns the EIP only to devices in it.
	metro       string
	assignments []assignment
	readAt      time.Time
}

// refresh reads the reservation: its ID by tag (possibly cached), then the
// reservation itself, fresh.
func (m *Manager) refresh(ctx context.Context, now time.Time) error {
	if m.res.id == "" {
		found, err := m.find(ctx)
		if err != nil {
			return err
		}
		m.res.id = found
	}
	r, err := m.metal.Reservation(ctx, m.res.id)
	if err != nil {
		// Perhaps the reservation was deleted and another carries the tag
		// now: look it up by tag again next time.
		m.res.id = ""
		return fmt.Errorf("reading the control-plane EIP reservation: %w", err)
	}
	m.observe(r, now)
	return nil
}

// find returns the ID of the one reservation carrying the tag.
func (m *Manager) find(ctx context.Context) (string, error) {
	match, err := m.lookup(ctx, m.metal.ReservationsWithTags)
	if err == nil && len(match) != 1 {
		// The cache may predate the tag: ask the API before complaining.
		match, err = m.lookup(ctx, m.metal.ReservationsWithTagsFresh)
	}
	if err != nil {
		return "", err
	}
	switch len(match) {
	case 0:
		m.eventOnce(reasonEIPNotFound, "No Elastic IP carries the tag %q", m.opts.EIPTag)
		return "", tagError{fmt.Errorf("no Elastic IP reservation in the project carries the tag %q (eipTag); tag the control-plane EIP with it, or unset eipTag to turn control-plane EIP management off", m.opts.EIPTag)}
	case 1:
		m.lastFindEvent = ""
		return match[0].GetId(), nil
	}
	var names []string
	for _, r := range match {
		names = append(names, fmt.Sprintf("%s (%s)", r.GetAddress(), r.GetId()))
	}
	m.eventOnce(reasonEIPNotFound, "%d Elastic IPs carry the tag %q", len(match), m.opts.EIPTag)
	return "", tagError{fmt.Errorf("%d Elastic IP reservations carry the tag %q (eipTag): %s; remove the tag from all but the control-plane EIP",
		len(match), m.opts.EIPTag, strings.Join(names, ", "))}
}

// tagError is a lookup that found no reservation, or several: the user
// must fix the tags.
type tagError struct{ error }

func (e tagError) Unwrap() error { return e.error }

func (m *Manager) lookup(ctx context.Context, list func(context.Context, ...string) ([]metalv1.IPReservation, error)) ([]metalv1.IPReservation, error) {
	rs, err := list(ctx, m.opts.EIPTag)
	if err != nil {
		return nil, fmt.Errorf("looking up the control-plane EIP by tag %q: %w", m.opts.EIPTag, err)
	}
	var match []metalv1.IPReservation
	for _, r := range rs {
		if slices.Contains(r.Tags, m.opts.EIPTag) {
			match = append(match, r)
		}
	}
	return match, nil
}

// observe records a freshly read reservation.
func (m *Manager) observe(r *metalv1.IPReservation, now time.Time) {
	m.res.address = r.GetAddress()
	m.res.metro = reservationMetro(r)
	m.res.assignments = assignmentsOf(r)
	m.res.readAt = now
	m.setHolder(now)
}

// setHolder notes a change of holder: the EIP's probe history belongs to
// the device it was routed to, so it starts again, and so does the grace.
func (m *Manager) setHolder(now time.Time) {
	var ids []string
	for _, a := range m.res.assignments {
		ids = append(ids, a.DeviceID)
	}
	slices.Sort(ids)
	key := strings.Join(ids, ",")
	if key != m.holderKey || m.holderSince.IsZero() {
		m.holderKey = key
		m.holderSince = now
		m.eipHealth = health{}
		m.firstFailure = time.Time{}
	}
}

// assignmentsOf lists the live assignments of a reservation. One being
// deleted is already on its way out and does not count.
func assignmentsOf(r *metalv1.IPReservation) []assignment {
	var out []assignment
	for _, a := range r.Assignments {
		if a.State != nil && *a.State == metalv1.IPASSIGNMENTSTATE_DELETING {
			continue
		}
		dev := ""
		if a.AssignedTo != nil {
			dev = deviceIDFromHref(a.AssignedTo.Href)
		}
		out = append(out, assignment{ID: a.GetId(), DeviceID: dev})
	}
	slices.SortFunc(out, func(a, b assignment) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// reservationMetro is the metro code of a reservation: its metro, or the
// metro of its facility (reservations made by facility); "" for neither.
func reservationMetro(r *metalv1.IPReservation) string {
	if r.Metro != nil && r.Metro.GetCode() != "" {
		return r.Metro.GetCode()
	}
	if r.Facility != nil && r.Facility.Metro != nil {
		return r.Facility.Metro.GetCode()
	}
	return ""
}
