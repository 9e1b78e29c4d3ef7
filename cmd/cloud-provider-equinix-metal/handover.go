package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	appconfig "k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/leaderlease"
)

// handOver releases the leader's Lease when kubelet stops the pod, so that
// the other replica leads at its next retry instead of after the Lease ran
// out (leaderlease says why the framework does not). The Releaser learns
// its identity when the framework first starts a controller: it does that
// only in the leader.
type handOver struct {
	mu      sync.Mutex
	lease   *leaderlease.Releaser
	leading sync.Once
}

// start makes the Releaser from the framework's leader-election settings
// and releases on SIGTERM (kubelet) or SIGINT, then exits. Without leader
// election (or with a lock other than a Lease) there is nothing to hand
// over, and the process keeps Go's default: it dies on the signal.
func (h *handOver) start(c *appconfig.CompletedConfig) {
	le := c.ComponentConfig.Generic.LeaderElection
	if !le.LeaderElect || le.ResourceLock != "leases" {
		return
	}
	client, err := coordinationclient.NewForConfig(rest.AddUserAgent(rest.CopyConfig(c.Kubeconfig), "leader-hand-over"))
	if err != nil {
		klog.ErrorS(err, "The Lease will not be released on shutdown")
		return
	}
	h.mu.Lock()
	h.lease = leaderlease.New(client, le.ResourceNamespace, le.ResourceName)
	h.mu.Unlock()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	go func() {
		sig := <-signals
		// The controllers keep running until the exit below: the other
		// replica may act within a round trip of the release, while this
		// process is exiting. Every write the CCM makes is idempotent
		// and guarded by the object's state, as with two leaders for the
		// moment a Lease changes hands anyway.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		released, err := h.lease.Release(ctx)
		switch {
		case err != nil:
			klog.ErrorS(err, "Stopping without releasing the Lease: the next leader waits for it to run out", "signal", sig.String())
		case released:
			klog.InfoS("Stopping: released the Lease for the next leader", "signal", sig.String(), "lease", le.ResourceNamespace+"/"+le.ResourceName)
		default:
			klog.InfoS("Stopping: not the leader", "signal", sig.String())
		}
		klog.FlushAndExit(klog.ExitFlushTimeout, 0)
	}()
}

// wrap makes every controller's start tell the Releaser that this process
// leads, before the controller starts.
func (h *handOver) wrap(constructors map[string]app.ControllerInitFuncConstructor) map[string]app.ControllerInitFuncConstructor {
	for name, c := range constructors {
		build := c.Constructor
		c.Constructor = func(initContext app.ControllerInitContext, completed *appconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			start := build(initContext, completed, cloud)
			return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				h.lead(ctx)
				return start(ctx, cc)
			}
		}
		constructors[name] = c
	}
	return constructors
}

func (h *handOver) lead(ctx context.Context) {
	h.mu.Lock()
	lease := h.lease
	h.mu.Unlock()
	if lease == nil {
		return
	}
	h.leading.Do(func() {
		if err := lease.Leading(ctx); err != nil {
			klog.ErrorS(err, "The Lease will not be released on shutdown")
		}
	})
}
