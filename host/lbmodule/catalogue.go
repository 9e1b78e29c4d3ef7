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
package lbmodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"

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

// Load loads the module the loadbalancer setting selects: a built-in
// embedded in the binary, or a file checked against its sha256 pin.
// Module log lines go to klog unless opts.Logger is set.
func Load(ctx context.Context, lb config.LoadBalancer, opts wasmhost.Options) (*wasmhost.Module, error) {
	builtin, path, o, err := sourceFor(lb)
	if err != nil {
		return nil, err
	}
	var wasm []byte
	name := builtin
	if builtin != "" {
		if wasm, err = modules.Builtin(builtin); err != nil {
			return nil, err
		}
	} else {
		name = path
		if wasm, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("load-balancer module %s cannot be read (%v); mount the module file at that path or fix the loadbalancer URL", path, unwrapPathError(err))
		}
		if lb.SHA256 != "" {
			sum := sha256.Sum256(wasm)
			if got := hex.EncodeToString(sum[:]); got != lb.SHA256 {
				return nil, fmt.Errorf("load-balancer module %s has sha256 %s but the loadbalancer URL pins %s; mount the pinned file or update the pin", path, got, lb.SHA256)
			}
		}
	}
	if opts.Logger == nil {
		opts.Logger = klogLogger()
	}
	return wasmhost.LoadBytes(ctx, name, wasm, o, opts)
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
