// Command panics is a module whose generate panics in its own code, for the
// test that a built module's panic names the function and file:line.
package main

import "github.com/metal-ccm/cloud-provider-equinix-metal/sdk"

func describe(sdk.Options) (sdk.Description, error) {
	return sdk.Description{Emits: []sdk.ObjectKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "lb"}}}, nil
}

func generate(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	var seen map[string]bool
	for _, s := range req.Services {
		seen[s.Name] = true // panics here
	}
	return sdk.GenerateResponse{}, nil
}

func init() {
	sdk.Register(sdk.Module{Name: "panics", Version: "0.1.0", Describe: describe, Generate: generate})
}

func main() {}
