package main

import "github.com/metal-ccm/cloud-provider-equinix-metal/sdk"

// Module is the empty built-in. It emits nothing: the CCM core writes the BGP
// node annotations (the {{n}} templates and network-4-private) for every
// load-balancer mode, and a user's own load balancer reads them. Those
// annotations carry a node's IPv4 sessions only: a load balancer of one's
// own that announces IPv6 addresses takes the IPv6 peers and source from a
// module's input instead (sdk.Node, ABI version 5).
var Module = sdk.Module{Name: "empty", Version: "1.0.0", Describe: describe, Generate: generate}

func describe(sdk.Options) (sdk.Description, error) { return sdk.Description{}, nil }

func generate(sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	return sdk.GenerateResponse{}, nil
}
