// Package instances implements cloudprovider.InstancesV2 over Equinix Metal
// devices: provider IDs, addresses, plan, metro and facility.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package instances

import (
	"context"
	"fmt"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// devices is what this package needs from the Equinix Metal client; the
// client answers from its cache where it can, since the node controllers ask
// for every node every few minutes (and every 5 s for NotReady nodes).
type devices interface {
	Device(ctx context.Context, id string) (*metalv1.Device, error)
	// DeviceFresh bypasses the cache: whether a device still exists or is
	// powered off must not be up to a cache period old.
	DeviceFresh(ctx context.Context, id string) (*metalv1.Device, error)
	DeviceByHostname(ctx context.Context, hostname string) (*metalv1.Device, error)
}

// Instances implements cloudprovider.InstancesV2.
type Instances struct {
	devices devices
	// notFound reports whether an error is the API's 404 for the device. Any
	// other error is passed up: answering "does not exist" on a timeout or a
	// 401 would make the node lifecycle controller delete the Node.
	notFound func(error) bool
	opts     Options
}

// Options are the choices of the node addresses.
type Options struct {
	// ExternalIPv6 lists the device's public IPv6 as an ExternalIP.
	// Upstream lists no IPv6, and kube-proxy exits (for its DaemonSet to
	// start it again) when its node's IPs change: adding one to every node
	// of a cluster taken over from upstream would restart kube-proxy on
	// every node at once, and the UDP requests in flight are lost. A
	// dual-stack cluster's kubelets can name their IPv6 with --node-ip
	// instead (an InternalIP, whatever this says).
	ExternalIPv6 bool
}

var _ cloudprovider.InstancesV2 = (*Instances)(nil)

// New returns InstancesV2 over the given device source.
func New(devices devices, notFound func(error) bool, o Options) *Instances {
	return &Instances{devices: devices, notFound: notFound, opts: o}
}

// device finds the node's device: by provider ID when the node has one,
// else by hostname, which the kubelet sets from the device name. fresh reads
// past the cache; the node lifecycle controller asks only about NotReady
// nodes, so the cost stays with the nodes that need an up-to-date answer.
func (i *Instances) device(ctx context.Context, node *v1.Node, fresh bool) (*metalv1.Device, error) {
	if node.Spec.ProviderID != "" {
		id, err := DeviceID(node.Spec.ProviderID)
		if err != nil {
			return nil, err
		}
		if fresh {
			return i.devices.DeviceFresh(ctx, id)
		}
		return i.devices.Device(ctx, id)
	}
	d, err := i.devices.DeviceByHostname(ctx, node.Name)
	if err != nil {
		return nil, fmt.Errorf("node %s has no provider ID, and looking up a device with hostname %q failed: %w", node.Name, node.Name, err)
	}
	return d, nil
}

// InstanceExists is false only when the API says the device is gone (404).
func (i *Instances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	_, err := i.device(ctx, node, true)
	switch {
	case err == nil:
		return true, nil
	case i.notFound(err):
		return false, nil
	default:
		return false, err
	}
}

// InstanceShutdown is true for a powered-off ("inactive") device.
func (i *Instances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	d, err := i.device(ctx, node, true)
	if err != nil {
		return false, err
	}
	return d.GetState() == metalv1.DEVICESTATE_INACTIVE, nil
}

// InstanceMetadata returns the provider ID, the plan as instance type, the
// metro as region and the facility as zone (upstream left the zone empty,
// which left topology.kubernetes.io/zone unset).
func (i *Instances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	d, err := i.device(ctx, node, false)
	if err != nil {
		if i.notFound(err) {
			return nil, cloudprovider.InstanceNotFound
		}
		return nil, err
	}
	addrs, err := nodeAddresses(d, node, i.opts)
	if err != nil {
		return nil, err
	}
	plan, metro, facility := d.GetPlan(), d.GetMetro(), d.GetFacility()
	return &cloudprovider.InstanceMetadata{
		ProviderID:    providerID(d.GetId()),
		InstanceType:  plan.GetSlug(),
		NodeAddresses: addrs,
		Region:        metro.GetCode(),
		Zone:          facility.GetCode(),
	}, nil
}
