// Package sdktest runs a built module the way the CCM does, so a module's
// own tests can check the compiled artefact and not only the Go handler.
package sdktest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

var (
	buildMu sync.Mutex
	built   = map[string][]byte{}
)

// Build compiles the main package in dir (a path as go build takes it, for
// example "." or "./mymodule") into a Wasm reactor, exactly as the module
// should be shipped: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
// The result is memoized per process; go's build cache makes reruns fast.
func Build(tb testing.TB, dir string) []byte {
	tb.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		tb.Fatal(err)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := built[abs]; ok {
		return b
	}
	out := filepath.Join(tb.TempDir(), "module.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, ".")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building %s for wasip1: %v\n%s", dir, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	built[abs] = b
	return b
}

// Load loads wasm with the CCM's loader (sdk/wasmhost) and limits (opts may be zero for
// the CCM's defaults) and closes it when the test ends.
func Load(tb testing.TB, wasm []byte, options sdk.Options, opts wasmhost.Options) *wasmhost.Module {
	tb.Helper()
	m, err := wasmhost.LoadBytes(context.Background(), "test", wasm, options, opts)
	if err != nil {
		tb.Fatalf("loading the module: %v", err)
	}
	tb.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// Generate loads wasm and runs one generate call on req, with the same
// verification, sandbox, limits and output validation as the CCM. The error
// is what the CCM would report.
func Generate(tb testing.TB, wasm []byte, options sdk.Options, req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	tb.Helper()
	return Load(tb, wasm, options, wasmhost.Options{}).Generate(context.Background(), req)
}
