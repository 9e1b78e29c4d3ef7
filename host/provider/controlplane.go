package provider

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/controlplane"
)

// setupControlPlane registers the control-plane EIP loop when eipTag is set.
// It runs from Initialize, so only the leader moves the EIP; when the
// leader's node dies, the replica that wins the next election takes over.
func (c *Cloud) setupControlPlane(cfg *config.Config) error {
	if cfg.EIPTag == "" {
		return nil
	}
	c.hooks = append(c.hooks, func(ctx context.Context, env *runEnv) {
		m := controlplane.New(controlplane.OptionsFromConfig(cfg), c.metal, env.kube, env.informers, env.recorder)
		go func() {
			if err := m.Run(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Control-plane EIP manager stopped")
			}
		}()
	})
	return nil
}
