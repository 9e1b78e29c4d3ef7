// Command bird is an example load-balancer module for the Equinix Metal cloud
// controller manager, written with the SDK in ../../../sdk. It renders a BIRD
// 2 configuration for every BGP node (one BGP session per Equinix Metal peer,
// announcing exactly the Service addresses) into a ConfigMap, for users who
// run BIRD as a DaemonSet instead of MetalLB or kube-vip.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bird.wasm .
//
// and select it with loadbalancer: wasm:///etc/ccm/modules/bird.wasm?namespace=bird.
// See ../../README.md for the walk-through.
package main

import "github.com/metal-ccm/cloud-provider-equinix-metal/sdk"

// The SDK's wasip1 glue calls the registered module from the ccm_lb_describe
// and ccm_lb_generate exports; natively (go test) this only records it.
func init() { sdk.Register(Module) }

// main is never called: the module is a WASI reactor, instantiated by the
// host and then called through its exports.
func main() {}
