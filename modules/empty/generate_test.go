package main

import (
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/modules/internal/golden"
)

func TestGolden(t *testing.T) { golden.Run(t, Module) }

func TestWasmMatchesNative(t *testing.T) { golden.RunWasm(t, Module) }
