// Package provider is the cloudprovider.Interface of the Equinix Metal CCM:
// the thin seam between k8s.io/cloud-provider's controllers and the
// packages that do the work (instances, EIPs, BGP, control plane).
package provider

import (
	"fmt"
	"io"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

// ProviderName is the --cloud-provider value and the provider ID scheme
// (equinixmetal://<device-uuid>), the same as upstream's.
const ProviderName = "equinixmetal"

func init() {
	// Registration lets k8s.io/cloud-provider's own helpers (InitCloudProvider,
	// app/testing) build the provider from a cloud-config file plus the
	// environment. The binary builds it with flags as well, through New.
	cloudprovider.RegisterCloudProvider(ProviderName, func(r io.Reader) (cloudprovider.Interface, error) {
		var b []byte
		if r != nil {
			var err error
			if b, err = io.ReadAll(r); err != nil {
				return nil, fmt.Errorf("reading the cloud-config: %w", err)
			}
		}
		cfg, err := config.Load(config.Sources{CloudConfig: b})
		if err != nil {
			return nil, err
		}
		return New(cfg)
	})
}

// Cloud implements cloudprovider.Interface.
type Cloud struct {
	cfg *config.Config
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// New builds the provider from a validated configuration.
func New(cfg *config.Config) (*Cloud, error) {
	if cfg == nil {
		return nil, fmt.Errorf("provider: no configuration")
	}
	return &Cloud{cfg: cfg}, nil
}

// Initialize starts the provider's own loops; the controllers of
// k8s.io/cloud-provider call it once, after leader election.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
}

// LoadBalancer is not implemented yet: the service controller stays off.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Instances is the deprecated interface; InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 is not implemented yet.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return nil, false }

// Zones is superseded by InstancesV2's metadata.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not used by external cloud providers.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is not offered: Equinix Metal has no route table to program.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName returns "equinixmetal".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID is true: EIPs are tagged with the kube-system namespace UID.
func (c *Cloud) HasClusterID() bool { return true }
