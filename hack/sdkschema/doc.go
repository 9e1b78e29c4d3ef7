// Package sdkschema generates the API schemas the SDK's host embeds
// (sdk/internal/schema/schemas) and checks the built-in modules' golden
// outputs against them. It is tests only, and lives in the main module
// because it reads Kubernetes' and MetalLB's modules, which the SDK must not
// require.
//
//	go test ./hack/sdkschema            # fails if the embedded schemas are stale
//	go test ./hack/sdkschema -update    # rewrites them
package sdkschema
