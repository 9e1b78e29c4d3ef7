// Command empty is the built-in load-balancer module for empty://. Build it for
// the CCM with `make modules`.
package main

import "github.com/metal-ccm/cloud-provider-equinix-metal/sdk"

func init() { sdk.Register(Module) }

// main is never called: the module is a WASI reactor.
func main() {}
