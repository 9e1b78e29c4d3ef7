// Package lbmodule is the CCM's side of load-balancer modules: it picks the
// module the loadbalancer setting names (a built-in embedded in the binary,
// or a pinned file) and keeps the cluster at what the module generates
// (server-side apply, prune, node annotations), with metrics and events.
//
// Its input is host/lbsnapshot's, a pure function of the cluster; this
// package does the I/O around the module call: the work queue (loop.go),
// one sync (sync.go), applying and skipping what is unchanged (apply.go),
// pruning (prune.go), node annotations (nodeannotations.go), listing
// (list.go), and its own errors for failures around the call (errors.go).
//
// Running a module — loading, verifying, calling it in a sandbox with limits
// and validating its output — is sdk/wasmhost's job, which a module author's
// tests (sdktest) use as well; this package adds what needs Kubernetes.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package lbmodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
	"github.com/metal-ccm/cloud-provider-equinix-metal/modules"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// sourceFor maps the parsed loadbalancer setting to a module source: the
// built-in's name or the file, and the options the module receives.
func sourceFor(lb config.LoadBalancer) (builtin, path string, o sdk.Options, err error) {
	o = lbsnapshot.ModuleOptions(lb)
	switch lb.Kind {
	case config.LBMetalLBCRD:
		return modules.MetalLBCRD, "", o, nil
	case config.LBMetalLBConfigMap:
		return modules.MetalLBConfigMap, "", o, nil
	case config.LBKubeVIP:
		return modules.KubeVIP, "", o, nil
	case config.LBEmpty:
		return modules.Empty, "", o, nil
	case config.LBWasm:
		return "", lb.Path, o, nil
	case config.LBNone:
		return "", "", o, errors.New("loadbalancer is not set, so there is no load-balancer module to load; set loadbalancer, for example to metallb:///metallb-system")
	default:
		return "", "", o, fmt.Errorf("loadbalancer names the unknown kind %q; use metallb, kube-vip, empty or wasm", lb.Kind)
	}
}

// Source is a module's bytes, read and checked but not compiled: what can
// be known about a module in milliseconds. Compiling it (Load) takes
// seconds, so the CCM reads at start and compiles in the background.
type Source struct {
	// Name is the built-in's name or the file's path, for messages.
	Name    string
	Wasm    []byte
	Options sdk.Options
}

// wasmHeader is what every WebAssembly binary module starts with: the
// magic "\0asm" and version 1.
const wasmHeader = "\x00asm\x01\x00\x00\x00"

// Read reads the module the loadbalancer setting selects: a built-in
// embedded in the binary, or a file checked against its sha256 pin and for
// the WebAssembly header, so the commonest mistakes (a wrong path, a stale
// pin, a file that is not a module) are known before anything compiles.
func Read(lb config.LoadBalancer) (Source, error) {
	builtin, path, o, err := sourceFor(lb)
	if err != nil {
		return Source{}, err
	}
	if builtin != "" {
		wasm, err := modules.Builtin(builtin)
		return Source{Name: builtin, Wasm: wasm, Options: o}, err
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return Source{}, fmt.Errorf("load-balancer module %s cannot be read (%v); mount the module file at that path or fix the loadbalancer URL", path, unwrapPathError(err))
	}
	if lb.SHA256 != "" {
		sum := sha256.Sum256(wasm)
		if got := hex.EncodeToString(sum[:]); got != lb.SHA256 {
			return Source{}, fmt.Errorf("load-balancer module %s has sha256 %s but the loadbalancer URL pins %s; mount the pinned file or update the pin", path, got, lb.SHA256)
		}
	}
	if !strings.HasPrefix(string(wasm[:min(len(wasm), len(wasmHeader))]), wasmHeader) {
		return Source{}, fmt.Errorf("load-balancer module %s: is not a valid WebAssembly module (it does not start with the WebAssembly header); build it with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared", path)
	}
	return Source{Name: path, Wasm: wasm, Options: o}, nil
}

// Load compiles and verifies the module: seconds for a built-in on a
// cold compilation cache, some 200 ms on a warm one. Module log lines go to
// klog unless opts.Logger is set.
func (s Source) Load(ctx context.Context, opts wasmhost.Options) (*wasmhost.Module, error) {
	if opts.Logger == nil {
		opts.Logger = klogLogger()
	}
	return wasmhost.LoadBytes(ctx, s.Name, s.Wasm, s.Options, opts)
}

// Load reads and loads the module the loadbalancer setting selects.
func Load(ctx context.Context, lb config.LoadBalancer, opts wasmhost.Options) (*wasmhost.Module, error) {
	src, err := Read(lb)
	if err != nil {
		return nil, err
	}
	return src.Load(ctx, opts)
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// OptionsFromConfig are the module limits the CCM's configuration sets.
func OptionsFromConfig(c *config.Config) wasmhost.Options {
	return wasmhost.Options{CacheDir: c.ModuleCacheDir, MemoryLimitMiB: c.ModuleMemoryLimitMiB, Timeout: c.ModuleTimeout, Logger: klogLogger()}
}

// klogLogger is a slog.Logger writing to klog, for module log lines: klog
// handles slog records itself, so a module's debug line is verbosity 4, its
// warning a klog warning and its error a klog error.
func klogLogger() *slog.Logger {
	return slog.New(logr.ToSlogHandler(klog.Background()))
}
