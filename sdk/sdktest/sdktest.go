// Package sdktest runs a built module the way the CCM does, so a module's
// own tests can check the compiled artefact and not only the Go handler.
package sdktest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
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
// the CCM's defaults) and closes it when the test ends. Load once and call
// Generate on the result as often as the test needs: a call on a loaded
// module costs milliseconds (a reused, reset instance), a load tens of
// milliseconds from the compilation cache and seconds without it. Unless
// opts.CacheDir is set, compiled code is cached in the user's cache
// directory, so reruns of the tests load fast too.
func Load(tb testing.TB, wasm []byte, options sdk.Options, opts wasmhost.Options) *wasmhost.Module {
	tb.Helper()
	m, err := load(wasm, options, opts)
	if err != nil {
		tb.Fatalf("loading the module: %v", err)
	}
	tb.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func load(wasm []byte, options sdk.Options, opts wasmhost.Options) (*wasmhost.Module, error) {
	if opts.CacheDir == "" {
		opts.CacheDir = cacheDir()
	}
	return wasmhost.LoadBytes(context.Background(), "test", wasm, options, opts)
}

// cacheDir is where compiled modules are kept across test runs, or "" (in
// memory) if the user has no cache directory.
var cacheDir = sync.OnceValue(func() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "cloud-provider-equinix-metal", "sdktest-wazero")
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	return dir
})

var (
	loadedMu sync.Mutex
	// loaded are the modules Generate loaded, by wasm digest and options,
	// kept for the life of the test binary.
	loaded = map[string]*wasmhost.Module{}
)

// Generate runs one generate call on req with wasm, with the same
// verification, sandbox, limits and output validation as the CCM. The error
// is what the CCM would report. The module is loaded on first use and kept
// for the rest of the test binary, so calling Generate in a loop does not
// load it again; Load gives a test its own module.
func Generate(tb testing.TB, wasm []byte, options sdk.Options, req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	tb.Helper()
	sum := sha256.Sum256(wasm)
	opt, _ := json.Marshal(options)
	key := string(sum[:]) + string(opt)
	loadedMu.Lock()
	m, ok := loaded[key]
	if !ok {
		var err error
		if m, err = load(wasm, options, wasmhost.Options{}); err != nil {
			loadedMu.Unlock()
			tb.Fatalf("loading the module: %v", err)
		}
		loaded[key] = m
	}
	loadedMu.Unlock()
	return m.Generate(context.Background(), req)
}
