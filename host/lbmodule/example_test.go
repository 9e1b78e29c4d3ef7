package lbmodule_test

import (
	"context"
	"log"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// How the CCM core wires a module: load it at start-up (a bad module is a
// start-up error), then run one reconciler and mark it dirty on every
// Service or node change.
func ExampleNewReconciler() {
	var (
		ctx      = context.Background()
		cfg      *config.Config       // the validated configuration
		rc       *rest.Config         // the CCM's client config
		recorder record.EventRecorder // the CCM's event recorder
		snapshot = func(ctx context.Context) (sdk.GenerateRequest, error) {
			// The CCM core reads its informers and BGP controller into
			// an lbsnapshot.Input and returns lbsnapshot.Build of it.
			return sdk.GenerateRequest{}, nil
		}
	)
	if cfg == nil {
		return // the example only shows the calls
	}
	m, err := lbmodule.Load(ctx, cfg.LB, lbmodule.OptionsFromConfig(cfg))
	if err != nil {
		log.Fatalf("loadbalancer %s: %v", cfg.LB, err)
	}
	r, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{
		Module:   m,
		Dynamic:  dynamic.NewForConfigOrDie(rc),
		Kube:     kubernetes.NewForConfigOrDie(rc),
		Snapshot: snapshot,
		Recorder: recorder,
	})
	if err != nil {
		log.Fatal(err)
	}
	go r.Run(ctx)
	r.MarkDirty() // from the Service and Node event handlers
}
