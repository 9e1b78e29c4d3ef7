package provider

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/cloudconfig"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

// WatchCredentials follows the cloud-config file at path until ctx ends and
// takes a rotated API key into use without a restart. load turns the file's
// new content into a configuration with the same flags and environment as
// at start (so a key set by METAL_API_KEY still wins over the file). An
// invalid file is reported and the running configuration kept. Only the
// key is applied live: it is what rotates; any other changed setting takes
// effect at the next restart, and the log says so.
func (c *Cloud) WatchCredentials(ctx context.Context, path string, load func([]byte) (*config.Config, error)) {
	err := cloudconfig.Watch(ctx, path, cloudconfig.Options{}, func(b []byte) {
		next, err := load(b)
		if err != nil {
			klog.ErrorS(err, "The cloud-config file changed but is not valid; keeping the running configuration", "path", path)
			return
		}
		if !c.metal.SetAPIKey(next.APIKey) {
			klog.InfoS("The cloud-config file changed; settings other than apiKey take effect at the next restart", "path", path)
		}
	})
	if err != nil {
		klog.ErrorS(err, "Not following the cloud-config file")
	}
}
