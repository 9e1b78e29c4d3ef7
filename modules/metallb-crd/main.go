// Command metallb-crd is the built-in load-balancer module for MetalLB >=
// 0.13 (custom resources). Build it for the CCM with `make modules`.
package main

import "github.com/metal-ccm/cloud-provider-equinix-metal/sdk"

func init() { sdk.Register(Module) }

// main is never called: the module is a WASI reactor.
func main() {}
