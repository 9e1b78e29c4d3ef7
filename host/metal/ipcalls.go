// Single API calls on one IP reservation or assignment (get, delete,
// assign), each a call of its own that writes its answer into the caches.

package metal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
)

// Reservation GETs one reservation (with assignments) whatever the cache
// holds, e.g. while waiting for a pending one, and updates the cache (a 404
// removes it and gives an IsNotFound error).
func (c *Client) Reservation(ctx context.Context, id string) (*metalv1.IPReservation, error) {
	if id == "" {
		return nil, errors.New("get IP reservation: empty ID")
	}
	ctx, cancel := c.call(ctx, opGetIP)
	defer cancel()
	out, resp, err := c.api.IPAddressesApi.FindIPAddressById(ctx, id).Include([]string{"assignments"}).Execute()
	if err != nil {
		err = c.red.apiError(opGetIP, resp, err)
		if IsNotFound(err) {
			c.reservations.remove(id)
		}
		return nil, err
	}
	switch {
	case out.IPReservation != nil:
		if cached(out.IPReservation) {
			c.reservations.upsert(compactReservation(out.IPReservation))
		}
		return out.IPReservation, nil
	case out.IPAssignment != nil:
		return nil, fmt.Errorf("%s: %s is an IP assignment, not a reservation", opGetIP.desc, id)
	}
	return nil, fmt.Errorf("%s: %s is neither a public IP reservation nor an assignment", opGetIP.desc, id)
}

// DeleteIP deletes a reservation, or unassigns an assignment, by its ID (the
// API's DELETE /ips/{id} does either). A 404 counts as done. The cache
// forgets the reservation, or the assignment inside its reservation.
// DELETE is idempotent and retried.
func (c *Client) DeleteIP(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("delete IP address: empty ID")
	}
	ctx, cancel := c.call(ctx, opDeleteIP)
	defer cancel()
	resp, err := c.api.IPAddressesApi.DeleteIPAddress(ctx, id).Execute()
	if err = c.red.apiError(opDeleteIP, resp, err); err != nil && !IsNotFound(err) {
		return err
	}
	c.forgetIP(id)
	return nil
}

// forgetIP removes a reservation, or an assignment from its reservation.
func (c *Client) forgetIP(id string) {
	c.editMu.Lock()
	defer c.editMu.Unlock()
	if _, ok, _ := c.reservations.idx.GetByKey(id); ok {
		c.reservations.remove(id)
		return
	}
	devs, _ := c.devices.idx.ByIndex(indexDeviceAssignment, id)
	for _, o := range devs {
		d := *o.(*metalv1.Device)
		d.IpAddresses = slices.DeleteFunc(slices.Clone(d.IpAddresses), func(a metalv1.IPAssignment) bool {
			return a.GetId() == id
		})
		c.devices.upsert(&d)
	}
	objs, _ := c.reservations.idx.ByIndex(indexAssignment, id)
	for _, o := range objs {
		r := *o.(*resv) // a copy: the cached one may be read meanwhile
		r.assignments = slices.DeleteFunc(slices.Clone(r.assignments), func(a assignment) bool { return a.id == id })
		c.reservations.upsert(&r)
	}
}

// AssignIP assigns address (an Elastic IP, e.g. "147.75.1.2" or
// "147.75.1.2/32") to a device. It is a POST and is not retried: the caller
// re-reads the reservation and decides again. The new assignment is added to
// the cached reservation of that address.
func (c *Client) AssignIP(ctx context.Context, deviceID, address string) (*metalv1.IPAssignment, error) {
	if deviceID == "" || address == "" {
		return nil, fmt.Errorf("assign IP address: need a device ID (%q) and an address (%q)", deviceID, address)
	}
	ctx, cancel := c.call(ctx, opAssignIP)
	defer cancel()
	a, resp, err := c.api.DevicesApi.CreateIPAssignment(ctx, deviceID).
		IPAssignmentInput(metalv1.IPAssignmentInput{Address: address}).Execute()
	if err != nil {
		return nil, c.red.apiError(opAssignIP, resp, err)
	}
	c.rememberAssignment(deviceID, address, a)
	return a, nil
}

// rememberAssignment adds a new assignment to its device and its
// reservation in the caches.
func (c *Client) rememberAssignment(deviceID, address string, a *metalv1.IPAssignment) {
	c.editMu.Lock()
	defer c.editMu.Unlock()
	if o, ok, _ := c.devices.idx.GetByKey(deviceID); ok {
		d := *o.(*metalv1.Device)
		d.IpAddresses = append(slices.DeleteFunc(slices.Clone(d.IpAddresses), func(x metalv1.IPAssignment) bool {
			return x.GetId() == a.GetId()
		}), *a)
		c.devices.upsert(&d)
	}
	var candidates []string
	for _, s := range []string{address, a.GetAddress(), a.GetNetwork()} {
		if s == "" {
			continue
		}
		s, _, _ = strings.Cut(s, "/")
		candidates = append(candidates, s)
	}
	if pb := a.ParentBlock; pb != nil && pb.GetNetwork() != "" {
		candidates = append(candidates, pb.GetNetwork())
	}
	for _, addr := range candidates {
		objs, _ := c.reservations.idx.ByIndex(indexAddress, addr)
		if len(objs) == 0 {
			continue
		}
		r := *objs[0].(*resv) // a copy: the cached one may be read meanwhile
		r.assignments = append(slices.DeleteFunc(slices.Clone(r.assignments), func(x assignment) bool {
			return x.id == a.GetId()
		}), compactAssignment(a))
		c.reservations.upsert(&r)
		return
	}
}
