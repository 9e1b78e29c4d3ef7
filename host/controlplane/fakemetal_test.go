package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
)

// fakeMetal is an in-memory MetalAPI with Equinix's rules for EIPs: one
// assignment per /32, assigning an assigned EIP or assigning outside the
// reservation's metro is refused, and unassigning
// deletes the assignment. It records every call.
type fakeMetal struct {
	mu       sync.Mutex
	res      []metalv1.IPReservation
	nextID   int
	calls    []string
	failNext map[string]int // method → how many of its next calls fail
	// metros are the devices' metros; a device not listed has none.
	metros map[string]string
}

func newFakeMetal(tag, address string, holders ...string) *fakeMetal {
	f := &fakeMetal{failNext: map[string]int{}}
	r := f.addReservation(address, tag)
	for _, dev := range holders {
		f.res[r].Assignments = append(f.res[r].Assignments, f.newAssignment(address, dev))
	}
	return f
}

func (f *fakeMetal) addReservation(address string, tags ...string) int {
	f.nextID++
	f.res = append(f.res, metalv1.IPReservation{
		Id: metalv1.PtrString(fmt.Sprintf("res-%d", f.nextID)), Address: metalv1.PtrString(address),
		Tags: tags, Type: metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4,
	})
	return len(f.res) - 1
}

func (f *fakeMetal) newAssignment(address, dev string) metalv1.IPAssignment {
	f.nextID++
	return metalv1.IPAssignment{
		Id: metalv1.PtrString(fmt.Sprintf("as-%d", f.nextID)), Address: metalv1.PtrString(address),
		AssignedTo: &metalv1.Href{Href: "/metal/v1/devices/" + dev},
	}
}

func (f *fakeMetal) fail(method string) error {
	if f.failNext[method] > 0 {
		f.failNext[method]--
		return fmt.Errorf("%s: 503 Service Unavailable", method)
	}
	return nil
}

func (f *fakeMetal) ReservationsWithTags(_ context.Context, tags ...string) ([]metalv1.IPReservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ReservationsWithTags")
	if err := f.fail("ReservationsWithTags"); err != nil {
		return nil, err
	}
	var out []metalv1.IPReservation
	for _, r := range f.res {
		all := true
		for _, t := range tags {
			all = all && slices.Contains(r.Tags, t)
		}
		if all {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeMetal) ReservationsWithTagsFresh(ctx context.Context, tags ...string) ([]metalv1.IPReservation, error) {
	return f.ReservationsWithTags(ctx, tags...)
}

func (f *fakeMetal) Reservation(_ context.Context, id string) (*metalv1.IPReservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "Reservation")
	if err := f.fail("Reservation"); err != nil {
		return nil, err
	}
	for _, r := range f.res {
		if r.GetId() == id {
			c := r
			c.Assignments = slices.Clone(r.Assignments)
			return &c, nil
		}
	}
	return nil, fmt.Errorf("GET /ips/%s: 404 Not Found", id)
}

func (f *fakeMetal) DeleteIP(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "DeleteIP "+id)
	if err := f.fail("DeleteIP"); err != nil {
		return err
	}
	for i := range f.res {
		n := len(f.res[i].Assignments)
		f.res[i].Assignments = slices.DeleteFunc(f.res[i].Assignments, func(a metalv1.IPAssignment) bool { return a.GetId() == id })
		if len(f.res[i].Assignments) != n {
			return nil
		}
	}
	return fmt.Errorf("DELETE /ips/%s: 404 Not Found", id)
}

func (f *fakeMetal) AssignIP(_ context.Context, deviceID, address string) (*metalv1.IPAssignment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "AssignIP "+deviceID)
	if err := f.fail("AssignIP"); err != nil {
		return nil, err
	}
	for i := range f.res {
		if f.res[i].GetAddress() != address {
			continue
		}
		if m := f.res[i].Metro; m != nil && f.metros[deviceID] != m.GetCode() {
			return nil, fmt.Errorf("POST /devices/%s/ips: 422 Unprocessable Entity: the reservation is in metro %s, the device in %q", deviceID, m.GetCode(), f.metros[deviceID])
		}
		if len(f.res[i].Assignments) > 0 {
			return nil, fmt.Errorf("POST /devices/%s/ips: 422 Unprocessable Entity: %s is already assigned", deviceID, address)
		}
		a := f.newAssignment(address, deviceID)
		f.res[i].Assignments = append(f.res[i].Assignments, a)
		return &a, nil
	}
	return nil, fmt.Errorf("POST /devices/%s/ips: 422 address %s is not reserved", deviceID, address)
}

func (f *fakeMetal) Device(ctx context.Context, id string) (*metalv1.Device, error) {
	return f.DeviceFresh(ctx, id)
}

func (f *fakeMetal) DeviceFresh(_ context.Context, id string) (*metalv1.Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := &metalv1.Device{Id: metalv1.PtrString(id)}
	if m := f.metros[id]; m != "" {
		d.Metro = &metalv1.DeviceMetro{Code: metalv1.PtrString(m)}
	}
	return d, nil
}

// holders returns the devices the EIP is assigned to.
func (f *fakeMetal) holders() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.res[0].Assignments {
		out = append(out, deviceIDFromHref(a.AssignedTo.Href))
	}
	return out
}

// writes returns the mutating calls so far.
func (f *fakeMetal) writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, "DeleteIP") || strings.HasPrefix(c, "AssignIP") {
			out = append(out, c)
		}
	}
	return out
}
