module github.com/metal-ccm/cloud-provider-equinix-metal/sdk

go 1.25.0

require (
	github.com/go-json-experiment/json v0.0.0-20251027170946-4849db3c2f7e
	github.com/tetratelabs/wazero v1.12.0
)

require golang.org/x/sys v0.44.0 // indirect
