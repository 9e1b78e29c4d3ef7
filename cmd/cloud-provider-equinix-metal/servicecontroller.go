package main

import (
	"context"
	"maps"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	coreinformers "k8s.io/client-go/informers/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbhosts"
)

// initFuncConstructors are k8s.io/cloud-provider's controllers, with the
// service controller given one representative node (host/lbhosts) instead
// of every node: its per-Service node lists cost Services × nodes, and this
// CCM's load balancer does not use them.
func initFuncConstructors() map[string]app.ControllerInitFuncConstructor {
	out := maps.Clone(app.DefaultInitFuncConstructors)
	c := out[names.ServiceLBController]
	c.Constructor = startServiceController
	out[names.ServiceLBController] = c
	return out
}

// startServiceController is the framework's own start of the service
// controller (k8s.io/cloud-provider/app), with lbhosts.NewInformer for
// nodes, and for Services the informer the provider gives (a failed
// Service synced again when the Equinix Metal API answers again:
// host/lbretry).
func startServiceController(initContext app.ControllerInitContext, completed *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		var services coreinformers.ServiceInformer = completed.SharedInformers.Core().V1().Services()
		if p, ok := cloud.(serviceInformerer); ok {
			services = p.ServiceInformer(services)
		}
		sc, err := servicecontroller.New(cloud,
			completed.ClientBuilder.ClientOrDie(initContext.ClientName),
			services,
			lbhosts.NewInformer(completed.SharedInformers.Core().V1().Nodes()),
			completed.ComponentConfig.KubeCloudShared.ClusterName,
			utilfeature.DefaultFeatureGate,
		)
		if err != nil {
			// As the framework: a provider without load balancers.
			klog.Errorf("Failed to start service controller: %v", err)
			return nil, false, nil
		}
		go sc.Run(ctx, int(completed.ComponentConfig.ServiceController.ConcurrentServiceSyncs), cc.ControllerManagerMetrics)
		return nil, true, nil
	}
}

// serviceInformerer is the provider's part in starting the service
// controller (provider.Cloud.ServiceInformer).
type serviceInformerer interface {
	ServiceInformer(coreinformers.ServiceInformer) coreinformers.ServiceInformer
}
