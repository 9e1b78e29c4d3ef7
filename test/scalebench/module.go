package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/modules"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// moduleResult is the MetalLB built-in, run in process on a synthetic
// cluster of the bench's size (the same shape the CCM sends).
type moduleResult struct {
	requestBytes int
	// With the production defaults (memory limit and deadline).
	defaultTime time.Duration
	defaultErr  error
	// With the default memory limit and a deadline of minutes.
	longTime time.Duration
	longErr  error
	// minMiB is the smallest memory limit (MiB) under which the call
	// succeeds, with a generous deadline; its call took minTime.
	minMiB  int
	minTime time.Duration
	// byLimit is the generate time under a few memory limits (a long
	// deadline): the guest collects garbage only near its limit, so the
	// limit trades memory for time.
	byLimit []limitResult
}

type limitResult struct {
	mib  int
	time time.Duration
	err  error
}

// limitsTried are the memory limits byLimit reports, in MiB.
var limitsTried = []int{64, 96, 128, 192}

// defaultCalls is how many calls the defaults' figure is the median of.
const defaultCalls = 5

func measureModule(ctx context.Context, services, nodes int) (*moduleResult, error) {
	wasm, err := modules.Builtin(modules.MetalLBCRD)
	if err != nil {
		return nil, err
	}
	cacheDir, err := os.MkdirTemp("", "scalebench-module-cache-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(cacheDir)
	req := sdktest.Snapshot(services, nodes)
	// A pool per Service, a BGPPeer per node and peer (two each), the
	// advertisement, and one password Secret per distinct BGP password.
	want := services + 2*nodes + 1
	passwords := map[sdk.Secret]bool{}
	for _, n := range req.Nodes {
		for _, p := range n.Peers {
			if p.Password != "" {
				passwords[p.Password] = true
			}
		}
	}
	want += len(passwords)
	// The size of what the module is sent (the binary request of ABI
	// version 2), not of the JSON an author sees.
	in, err := sdk.EncodeGenerateRequest(req)
	if err != nil {
		return nil, err
	}
	res := &moduleResult{requestBytes: len(in)}
	// tryN loads the module with the limits and returns the median time
	// of n calls, each with a different request (an identical one would
	// be answered from the memo without a call).
	tryN := func(n, mib int, timeout time.Duration) (time.Duration, error) {
		m, err := wasmhost.LoadBytes(ctx, modules.MetalLBCRD, wasm, sdk.Options{Namespace: "metallb-system"},
			wasmhost.Options{CacheDir: cacheDir, MemoryLimitMiB: mib, Timeout: timeout})
		if err != nil {
			return 0, err
		}
		defer m.Close(context.Background())
		var times []time.Duration
		for i := range n {
			req.Services[0].Ports[0].Port = int32(1000 + i)
			start := time.Now()
			resp, err := m.Generate(ctx, req)
			if err == nil && len(resp.Objects) != want {
				err = fmt.Errorf("%d objects, want %d", len(resp.Objects), want)
			}
			times = append(times, time.Since(start))
			if err != nil {
				return times[len(times)-1], err
			}
		}
		slices.Sort(times)
		return times[len(times)/2], nil
	}
	try := func(mib int, timeout time.Duration) (time.Duration, error) { return tryN(1, mib, timeout) }
	// The defaults' figure is the one the goal is about: the median of
	// five calls, as one call on this shared machine varied by ±20%.
	res.defaultTime, res.defaultErr = tryN(defaultCalls, 0, 0)
	if res.defaultErr != nil {
		res.longTime, res.longErr = try(0, 5*time.Minute)
	}
	for _, mib := range limitsTried {
		d, err := try(mib, 5*time.Minute)
		res.byLimit = append(res.byLimit, limitResult{mib, d, err})
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Binary search for the smallest limit that works, in MiB.
	lo, hi := 4, 2048
	for lo < hi {
		mid := (lo + hi) / 2
		d, err := try(mid, 5*time.Minute)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			hi, res.minTime = mid, d
		} else {
			lo = mid + 1
		}
	}
	res.minMiB = lo
	if res.minTime == 0 {
		d, err := try(lo, 5*time.Minute)
		if err != nil {
			return nil, fmt.Errorf("the module fails even with %d MiB: %w", lo, err)
		}
		res.minTime = d
	}
	return res, nil
}
