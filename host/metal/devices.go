package metal

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"k8s.io/client-go/tools/cache"
)

// deviceInclude expands each IP address's parent block, so that the private
// management address's network and CIDR (the network-4-private annotation)
// are in the device without another call.
var deviceInclude = []string{"ip_addresses.parent_block"}

const (
	indexHostname         = "hostname"
	indexDeviceAssignment = "assignment"
)

// idKey keys cached objects by their API ID.
func idKey(obj any) (string, error) {
	switch o := obj.(type) {
	case *metalv1.Device:
		return o.GetId(), nil
	case *resv:
		return o.id, nil
	}
	return "", fmt.Errorf("no ID for %T", obj)
}

func newDeviceStore() *store {
	return newStore(cacheDevices, idKey, cache.Indexers{
		indexHostname: func(obj any) ([]string, error) {
			if h := obj.(*metalv1.Device).GetHostname(); h != "" {
				return []string{h}, nil
			}
			return nil, nil
		},
		// The device's IP assignments, so that AssignIP and DeleteIP keep
		// its ip_addresses in step with the reservation cache.
		indexDeviceAssignment: func(obj any) ([]string, error) {
			d := obj.(*metalv1.Device)
			ids := make([]string, 0, len(d.IpAddresses))
			for _, a := range d.IpAddresses {
				if a.GetId() != "" {
					ids = append(ids, a.GetId())
				}
			}
			return ids, nil
		},
	})
}

// shallow returns a copy of a cached device, so that a caller setting a
// top-level field does not change the cache. Nested values are shared and
// must be treated as read-only.
func shallow(d *metalv1.Device) *metalv1.Device {
	cp := *d
	return &cp
}

// RefreshDevices re-reads every device of the project (all pages), replacing
// the cache. Concurrent calls share one listing.
func (c *Client) RefreshDevices(ctx context.Context) error {
	return c.devices.refresh(ctx, c.devices.ticket(), refreshTimeout, c.listAllDevices)
}

func (c *Client) listAllDevices(ctx context.Context) ([]any, error) {
	devs, err := c.listDevices(ctx, "")
	if err != nil {
		return nil, err
	}
	objs := make([]any, 0, len(devs))
	for i := range devs {
		if devs[i].GetId() != "" {
			objs = append(objs, &devs[i])
		}
	}
	return objs, nil
}

// listDevices lists the project's devices, all pages, optionally filtered by
// hostname on the API side.
func (c *Client) listDevices(ctx context.Context, hostname string) ([]metalv1.Device, error) {
	return listPages(ctx, func(ctx context.Context, page int32) ([]metalv1.Device, *metalv1.Meta, error) {
		ctx, cancel := c.call(ctx, opListDevices)
		defer cancel()
		req := c.api.DevicesApi.FindProjectDevices(ctx, c.opts.ProjectID).
			Include(deviceInclude).Page(page).PerPage(int32(c.opts.PageSize))
		if hostname != "" {
			req = req.Hostname(hostname)
		}
		list, resp, err := req.Execute()
		if err != nil {
			return nil, nil, c.red.apiError(opListDevices, resp, err)
		}
		return list.Devices, list.Meta, nil
	})
}

// ensureDevicesLoaded fills the device cache once (shared by concurrent
// callers); later refreshes come from Run.
func (c *Client) ensureDevicesLoaded(ctx context.Context) error {
	if c.devices.isLoaded() {
		return nil
	}
	return c.devices.refresh(ctx, 0, refreshTimeout, c.listAllDevices)
}

// Device returns a device by ID, from the cache when it is there (filled by a
// full listing on first use and by Run), else by one GET that also fills the
// cache. The device includes ip_addresses with their parent_block. An
// IsNotFound error means the API answered 404. The result's nested values
// are shared with the cache: do not modify them.
func (c *Client) Device(ctx context.Context, id string) (*metalv1.Device, error) {
	if id == "" {
		return nil, errors.New("get device: empty device ID")
	}
	if err := c.ensureDevicesLoaded(ctx); err != nil {
		return nil, err
	}
	if obj, ok, _ := c.devices.idx.GetByKey(id); ok {
		cacheHit(cacheDevices)
		return shallow(obj.(*metalv1.Device)), nil
	}
	cacheMiss(cacheDevices)
	return c.DeviceFresh(ctx, id)
}

// DeviceFresh GETs a device from the API whatever the cache holds, and
// updates the cache with the answer (a 404 removes it). Use it where a
// stale answer does harm, e.g. deciding that a device is gone or shut down.
func (c *Client) DeviceFresh(ctx context.Context, id string) (*metalv1.Device, error) {
	if id == "" {
		return nil, errors.New("get device: empty device ID")
	}
	ch := c.gets.DoChan("device/"+id, func() (any, error) {
		ctx, cancel := c.call(context.WithoutCancel(ctx), opGetDevice)
		defer cancel()
		d, resp, err := c.api.DevicesApi.FindDeviceById(ctx, id).Include(deviceInclude).Execute()
		if err != nil {
			err = c.red.apiError(opGetDevice, resp, err)
			if IsNotFound(err) {
				c.devices.remove(id)
			}
			return nil, err
		}
		if d.GetId() == "" {
			return nil, fmt.Errorf("get device: the API answered device %s without an ID", id)
		}
		c.devices.upsert(d)
		return d, nil
	})
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("get device %s: %w", id, ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return shallow(r.Val.(*metalv1.Device)), nil
	}
}

// DeviceByHostname returns the project's device whose hostname is exactly
// hostname: from the cache, else by a listing filtered by hostname (all
// pages). No such device gives an IsNotFound error; two give an error that
// asks for a provider ID.
func (c *Client) DeviceByHostname(ctx context.Context, hostname string) (*metalv1.Device, error) {
	if hostname == "" {
		return nil, errors.New("find device by hostname: empty hostname")
	}
	if err := c.ensureDevicesLoaded(ctx); err != nil {
		return nil, err
	}
	objs, _ := c.devices.idx.ByIndex(indexHostname, hostname)
	if len(objs) > 0 {
		cacheHit(cacheDevices)
		devs := make([]*metalv1.Device, 0, len(objs))
		for _, o := range objs {
			devs = append(devs, o.(*metalv1.Device))
		}
		return pickByHostname(hostname, devs)
	}
	cacheMiss(cacheDevices)
	listed, err := c.listDevices(ctx, hostname)
	if err != nil {
		return nil, err
	}
	var devs []*metalv1.Device
	for i := range listed {
		d := &listed[i]
		// The API's hostname filter is not documented as exact; only an
		// exact match counts.
		if d.GetHostname() == hostname && d.GetId() != "" {
			c.devices.upsert(d)
			devs = append(devs, d)
		}
	}
	if len(devs) == 0 {
		return nil, &notFoundError{What: fmt.Sprintf("device with hostname %q in project %s", hostname, c.opts.ProjectID)}
	}
	return pickByHostname(hostname, devs)
}

// pickByHostname returns the one device, or says why there is not one.
func pickByHostname(hostname string, devs []*metalv1.Device) (*metalv1.Device, error) {
	if len(devs) == 1 {
		return shallow(devs[0]), nil
	}
	ids := make([]string, 0, len(devs))
	for _, d := range devs {
		ids = append(ids, d.GetId())
	}
	sort.Strings(ids)
	return nil, fmt.Errorf("find device by hostname: %d devices are named %q (%v); set the node's spec.providerID to equinixmetal://<device-id> to pick one", len(devs), hostname, ids)
}

// ForgetDevice drops a device from the cache and from the memory of BGP
// sessions, e.g. after its Node was deleted; the next lookup asks the API.
func (c *Client) ForgetDevice(id string) {
	c.devices.remove(id)
	c.bgpMu.Lock()
	delete(c.bgpSessions, id)
	delete(c.bgpSessions, sessionKey(id, metalv1.BGPSESSIONINPUTADDRESSFAMILY_IPV6))
	c.bgpMu.Unlock()
}
