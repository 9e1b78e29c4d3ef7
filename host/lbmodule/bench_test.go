package lbmodule_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// BenchmarkGenerateMetalLB1000x100 is one full generate call of the MetalLB
// CRD built-in for 1,000 Services and 100 nodes (2 peers each): an
// instance in its pristine state, the binary request and response of ABI
// version 3, output validation. Goal: ≤ 50 ms.
func BenchmarkGenerateMetalLB1000x100(b *testing.B) { benchmarkGenerateMetalLB(b, 1000, 100) }

// BenchmarkGenerateMetalLB10000x1000 is the same call at the scale bench's
// size (10,000 Services, 1,000 nodes): what one Service more costs the CCM
// there. Goal (with the host's share, in the scale bench): ≤ 500 ms.
func BenchmarkGenerateMetalLB10000x1000(b *testing.B) { benchmarkGenerateMetalLB(b, 10000, 1000) }

func benchmarkGenerateMetalLB(b *testing.B, services, nodes int) {
	// The production defaults (96 MiB, 15 s), not the tests' tighter limits.
	m := sdktest.Load(b, sdktest.Build(b, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, wasmhost.Options{CacheDir: cacheDir})
	req := sdktest.Snapshot(services, nodes)
	b.ResetTimer()
	cpuPerOp(b)
	for i := 0; b.Loop(); i++ {
		// A different input each time, so every iteration is a real call
		// and not the memoized output of the previous one.
		req.Services[0].Ports[0].Port = int32(1 + i%60000)
		resp, err := m.Generate(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if want := services + 2*nodes + 1 + 1; len(resp.Objects) != want { // pools, peers, advertisement, password Secret
			b.Fatalf("%d objects, want %d", len(resp.Objects), want)
		}
	}
}

// BenchmarkCallOverhead is a generate call with a tiny input to a module
// that does nothing: the fixed cost of instance + call + validation.
func BenchmarkCallOverhead(b *testing.B) {
	m := sdktest.Load(b, sdktest.Build(b, "../../modules/empty"), sdk.Options{}, wasmhost.Options{CacheDir: cacheDir})
	req := sdktest.Snapshot(1, 1)
	b.ResetTimer()
	cpuPerOp(b)
	for i := 0; b.Loop(); i++ {
		req.Services[0].Ports[0].Port = int32(1 + i%60000)
		if _, err := m.Generate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadWarmCache is wasmhost.LoadBytes of the MetalLB built-in when
// its compiled code is already in the on-disk cache (a CCM restart): read
// cache, verify, check the ABI version, describe. Goal: ≤ 100 ms.
func BenchmarkLoadWarmCache(b *testing.B) {
	wasm := sdktest.Build(b, "../../modules/metallb-crd")
	o := wasmhost.Options{CacheDir: b.TempDir()}
	warm, err := wasmhost.LoadBytes(context.Background(), "metallb-crd", wasm, sdk.Options{}, o)
	if err != nil {
		b.Fatal(err)
	}
	warm.Close(context.Background())
	b.ResetTimer()
	for b.Loop() {
		m, err := wasmhost.LoadBytes(context.Background(), "metallb-crd", wasm, sdk.Options{}, o)
		if err != nil {
			b.Fatal(err)
		}
		m.Close(context.Background())
	}
}

// BenchmarkGenerateUnchanged1000x100 is a resync of an unchanged cluster:
// the same request again, answered from the memoized output (decoded and
// validated again, but no Wasm call).
func BenchmarkGenerateUnchanged1000x100(b *testing.B) {
	m := sdktest.Load(b, sdktest.Build(b, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, wasmhost.Options{CacheDir: cacheDir})
	req := sdktest.Snapshot(1000, 100)
	if _, err := m.Generate(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Generate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuPerOp reports the process's CPU time (user + system) per iteration
// when the benchmark ends: on a shared machine wall time measures the
// neighbours as much as the code.
func cpuPerOp(b *testing.B) {
	var start syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &start)
	b.Cleanup(func() {
		var end syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
		used := end.Utime.Nano() + end.Stime.Nano() - start.Utime.Nano() - start.Stime.Nano()
		b.ReportMetric(float64(used)/1e6/float64(b.N), "cpu-ms/op")
	})
}

// BenchmarkLoadedCall100x10 is what a module author's test pays per call
// once sdktest.Load has loaded the module: Snapshot(100, 10) through the
// MetalLB built-in. Goal: ≤ 20 ms.
func BenchmarkLoadedCall100x10(b *testing.B) {
	m := sdktest.Load(b, sdktest.Build(b, "../../modules/metallb-crd"), sdk.Options{Namespace: "metallb-system"}, wasmhost.Options{CacheDir: cacheDir})
	req := sdktest.Snapshot(100, 10)
	b.ResetTimer()
	cpuPerOp(b)
	for i := 0; b.Loop(); i++ {
		req.Services[0].Ports[0].Port = int32(1 + i%60000)
		if _, err := m.Generate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
