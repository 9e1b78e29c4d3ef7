package main

import (
	"encoding/json"
	"syscall"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
)

// BenchmarkNativeGenerate1000x100 is the handler compiled natively, with
// the request as JSON: the floor the Wasm call is compared with since the
// goal was set. (The Wasm call now gets the binary request; that path,
// natively, is BenchmarkNativeGenerateBinary1000x100.)
func BenchmarkNativeGenerate1000x100(b *testing.B) {
	req := sdktest.Snapshot(1000, 100)
	req.APIVersion, req.Kind = sdk.APIVersion, sdk.KindGenerateRequest
	in, _ := json.Marshal(req)
	b.SetBytes(int64(len(in)))
	cpuPerOp(b)
	for b.Loop() {
		if _, err := Module.HandleGenerate(in); err != nil {
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

// BenchmarkNativeGenerateBinary1000x100 is the handler compiled natively
// through the path a module of ABI version 2 takes in Wasm: the binary
// request in, JSON out.
func BenchmarkNativeGenerateBinary1000x100(b *testing.B) {
	benchmarkBinaryRequest(b, Module.HandleGenerateBinary)
}

// BenchmarkNativeGenerateWire1000x100 is the handler compiled natively
// through the path a module of ABI version 3 takes in Wasm: the binary
// request in, the binary response out.
func BenchmarkNativeGenerateWire1000x100(b *testing.B) {
	benchmarkBinaryRequest(b, Module.HandleGenerateWire)
}

// BenchmarkNativeGenerateWire10000x1000 is the ABI version 3 path at the
// scale bench's size, next to BenchmarkGenerateMetalLB10000x1000.
func BenchmarkNativeGenerateWire10000x1000(b *testing.B) {
	benchmarkBinaryRequestSize(b, Module.HandleGenerateWire, 10000, 1000)
}

func benchmarkBinaryRequest(b *testing.B, handle func([]byte) ([]byte, error)) {
	benchmarkBinaryRequestSize(b, handle, 1000, 100)
}

func benchmarkBinaryRequestSize(b *testing.B, handle func([]byte) ([]byte, error), services, nodes int) {
	req := sdktest.Snapshot(services, nodes)
	req.APIVersion, req.Kind = sdk.APIVersion, sdk.KindGenerateRequest
	in, err := sdk.EncodeGenerateRequest(req)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	cpuPerOp(b)
	for b.Loop() {
		if _, err := handle(in); err != nil {
			b.Fatal(err)
		}
	}
}
