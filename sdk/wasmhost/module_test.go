package wasmhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

const fakePassword = "fake-bgp-password-for-tests"

var cacheDir string

func TestMain(m *testing.M) {
	// One compilation cache for the whole package: compiling a Go module
	// cold takes seconds, from the cache tens of milliseconds.
	dir, err := os.MkdirTemp("", "wasmhost-cache")
	if err != nil {
		panic(err)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// opts are tight limits for tests, with a deadline generous enough for a
// machine loaded by parallel builds; loopOpts has a short one, for the
// module that never returns.
func opts() wasmhost.Options {
	return wasmhost.Options{CacheDir: cacheDir, MemoryLimitMiB: 32, Timeout: 20 * time.Second}
}

func loopOpts() wasmhost.Options {
	o := opts()
	o.Timeout = time.Second
	return o
}

func hostile(t testing.TB) []byte { return sdktest.Build(t, "testdata/hostile") }

func request() sdk.GenerateRequest {
	return sdk.GenerateRequest{
		Services: []sdk.Service{{Namespace: "default", Name: "nginx", UID: "u1", IPs: []string{"145.40.1.5"}}},
		Nodes: []sdk.Node{{Name: "worker-1", LocalASN: 65000, SourceIP: "10.0.0.1",
			Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1", Password: fakePassword}}}},
		Annotations: sdk.AnnotationTemplates{LocalASN: "metal.equinix.com/bgp-peers-{{n}}-node-asn"},
	}
}

// hostileLine is the line of the hostile module's source that contains s,
// for the file:line a crash there must be reported at.
func hostileLine(t *testing.T, s string) string {
	t.Helper()
	src, err := os.ReadFile("testdata/hostile/main.go")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, s) {
			return strconv.Itoa(i + 1)
		}
	}
	t.Fatalf("no line of testdata/hostile/main.go contains %q", s)
	return ""
}

func load(t *testing.T, wasm []byte, mode string) *wasmhost.Module {
	t.Helper()
	m, err := wasmhost.LoadBytes(context.Background(), "hostile", wasm, sdk.Options{Params: map[string]string{"mode": mode}}, opts())
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func TestHostileModules(t *testing.T) {
	wasm := hostile(t)
	for _, tc := range []struct {
		mode   string
		reason wasmhost.Reason
		msg    string
		memMiB int
	}{
		// A crash names the module's own frame: from the Go runtime's
		// traceback on the guest's stderr, or the wasm stack when the host
		// stopped the guest (no traceback then, and no lines).
		{"trap", wasmhost.ReasonTrap, "trapped: fatal error: stack overflow, at main.recurse (main.go:" + hostileLine(t, "func recurse(") + ")", 0},
		{"exit", wasmhost.ReasonTrap, "trapped", 0},
		{"loop", wasmhost.ReasonDeadline, "did not finish within 1s (stopped in main.spin)", 0},
		{"membomb", wasmhost.ReasonMemory, "ran out of memory (limit 32 MiB), at main.generate (main.go:" + hostileLine(t, "keep = append(keep") + ")", 0},
		{"gopanic", wasmhost.ReasonTrap, "trapped: panic: boom in a goroutine, at main.crash (main.go:" + hostileLine(t, "func crash(") + ")", 0},
		{"nilmap", wasmhost.ReasonTrap, "trapped: panic: assignment to entry in nil map, at main.generate (main.go:" + hostileLine(t, `m["x"] = 1`) + ")", 0},
		{"deadlock", wasmhost.ReasonTrap, "trapped: fatal error: all goroutines are asleep - deadlock!, at main.deadlock (main.go:" + hostileLine(t, "func deadlock(") + ")", 0},
		{"badjson", wasmhost.ReasonInvalidOutput, "invalid JSON", 0},
		{"abi3-badwire", wasmhost.ReasonInvalidOutput, "generate returned an invalid binary response: truncated", 0},
		{"undeclared", wasmhost.ReasonForbiddenOutput, "emitted Secret hostile/stolen (v1), a kind it did not declare", 0},
		{"othernamespace", wasmhost.ReasonForbiddenOutput, `emitted ConfigMap kube-system/evil outside its declared namespace "hostile"`, 0},
		{"ownlabel", wasmhost.ReasonForbiddenOutput, "which only the host sets", 0},
		{"badschema", wasmhost.ReasonInvalidOutput, "returned ConfigMap hostile/fine: data.ip: must be a string, got number; the API server would refuse it; nothing was applied", 0},
		{"error", wasmhost.ReasonModuleError, "ccm_lb_generate failed: cannot work with password [redacted]", 0},
		{"bigoutput", wasmhost.ReasonInvalidOutput, "wrote more than 67108864 bytes with output_write", 256},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			o := opts()
			if tc.mode == "loop" {
				o = loopOpts()
			}
			if tc.memMiB != 0 {
				o.MemoryLimitMiB = tc.memMiB
			}
			m, err := wasmhost.LoadBytes(context.Background(), "hostile", wasm, sdk.Options{Params: map[string]string{"mode": tc.mode}}, o)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			resp, err := m.Generate(context.Background(), request())
			var me *wasmhost.Error
			if !errors.As(err, &me) {
				t.Fatalf("got %v (%+v), want a module error", err, resp)
			}
			if me.Reason != tc.reason || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got reason %s, error %q; want %s containing %q", me.Reason, err, tc.reason, tc.msg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if strings.Contains(err.Error(), fakePassword) {
				t.Errorf("error leaks the BGP password: %q", err)
			}
			if len(resp.Objects) != 0 {
				t.Errorf("a failed call returned objects: %v", resp.Objects)
			}
			// The module is not poisoned: the next good call works.
			good := load(t, wasm, "ok")
			if _, err := good.Generate(context.Background(), request()); err != nil {
				t.Fatalf("a good call after a failed one: %v", err)
			}
		})
	}
}

// TestSdktestRefusesWhatTheAPIServerWould: a module author's test through
// sdktest.Generate gets the refusal the CCM would put in its Event, for
// output the API server would refuse.
func TestSdktestRefusesWhatTheAPIServerWould(t *testing.T) {
	resp, err := sdktest.Generate(t, hostile(t), sdk.Options{Params: map[string]string{"mode": "badschema"}}, request())
	const want = "load-balancer module test returned ConfigMap hostile/fine: data.ip: must be a string, got number; the API server would refuse it"
	var me *wasmhost.Error
	if !errors.As(err, &me) || me.Reason != wasmhost.ReasonInvalidOutput || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v (%+v), want an invalid_output error starting %q", err, resp, want)
	}
}

// TestABIVersion2StillSpoken: a module built with the SDK of ABI version
// 2 gets the binary request and answers in JSON, as it did.
func TestABIVersion2StillSpoken(t *testing.T) {
	m := load(t, hostile(t), "abi2")
	req := request()
	req.Services[0].Locations = []sdk.AddressLocation{{IP: "145.40.1.5", Metro: "sv"}}
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Objects) != 1 || resp.Objects[0].Name() != "fine" {
		t.Fatalf("objects = %v", resp.Objects)
	}
}

// TestABIVersion1GetsNoLocations: a module of ABI version 1 gets the JSON
// it got before Service.Locations, byte for byte, and the caller's request
// is left as it was.
func TestABIVersion1GetsNoLocations(t *testing.T) {
	req := request()
	before, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	req.Services[0].Locations = []sdk.AddressLocation{{IP: "145.40.1.5", Metro: "sv"}}
	got, err := json.Marshal(wasmhost.WithoutLocations(req))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, before) {
		t.Errorf("ABI version 1 request\n got %s\nwant %s", got, before)
	}
	if req.Services[0].Locations == nil {
		t.Error("the caller's request lost its locations")
	}
}

func TestGoodHostileModeAndDescribe(t *testing.T) {
	m := load(t, hostile(t), "ok")
	d := m.Describe()
	if d.Name != "hostile" || len(d.Emits) != 1 || d.Emits[0].Namespace != "hostile" {
		t.Fatalf("describe = %+v", d)
	}
	resp, err := m.Generate(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Objects) != 1 || resp.Objects[0].Name() != "fine" {
		t.Fatalf("objects = %v", resp.Objects)
	}
}

func TestLoadRejects(t *testing.T) {
	noexports := sdktest.Build(t, "testdata/noexports")
	for _, tc := range []struct {
		name string
		load func() (*wasmhost.Module, error)
		msg  string
	}{
		{"no ABI exports", func() (*wasmhost.Module, error) {
			return wasmhost.LoadBytes(context.Background(), "noexports", noexports, sdk.Options{}, opts())
		}, "does not follow the ccm_lb_v1 ABI: it does not export ccm_abi_version, does not export ccm_lb_describe, does not export ccm_lb_generate; build it with the SDK"},
		{"not wasm", func() (*wasmhost.Module, error) {
			return wasmhost.LoadBytes(context.Background(), "junk", []byte("#!/bin/sh\n"), sdk.Options{}, opts())
		}, "is not a valid WebAssembly module"},
		{"memory limit below the module's minimum", func() (*wasmhost.Module, error) {
			o := opts()
			o.MemoryLimitMiB = 2
			return wasmhost.LoadBytes(context.Background(), "small", hostile(t), sdk.Options{}, o)
		}, "memory limit 2 MiB is too small"},
		{"describe traps", func() (*wasmhost.Module, error) {
			return wasmhost.LoadBytes(context.Background(), "hostile", hostile(t), sdk.Options{Params: map[string]string{"mode": "describe-trap"}}, opts())
		}, "trapped"},
		{"namespaced kind without a namespace", func() (*wasmhost.Module, error) {
			return wasmhost.LoadBytes(context.Background(), "hostile", hostile(t), sdk.Options{Params: map[string]string{"mode": "no-namespace"}}, opts())
		}, "declares the namespaced kind ConfigMap (v1) without a namespace; declare its namespace in describe, for a module from the loadbalancer URL option ?namespace=<namespace>"},
		{"initialisation loops", func() (*wasmhost.Module, error) {
			return wasmhost.LoadBytes(context.Background(), "hostile", hostile(t), sdk.Options{Params: map[string]string{"mode": "initloop"}}, loopOpts())
		}, "load-balancer module hostile did not finish within 1s (stopped in main.init.0)"},
		{"runtime error in init", func() (*wasmhost.Module, error) {
			return wasmhost.LoadBytes(context.Background(), "hostile", hostile(t), sdk.Options{Params: map[string]string{"mode": "initnilmap"}}, opts())
		}, "load-balancer module hostile trapped: panic: assignment to entry in nil map, at main.init.0 (main.go:" + hostileLine(t, `m["init"] = 1`) + ")"},
		{"other ABI version", func() (*wasmhost.Module, error) {
			return wasmhost.LoadBytes(context.Background(), "hostile", hostile(t), sdk.Options{Params: map[string]string{"mode": "abi-future"}}, opts())
		}, "load-balancer module hostile speaks ABI version 7, this CCM speaks 1 to 6; rebuild the module"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.load()
			if err == nil {
				m.Close(context.Background())
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, tc.msg)
			}
		})
	}
}

func TestSameInputIsMemoized(t *testing.T) {
	m := load(t, hostile(t), "ok")
	req := request()
	for range 3 {
		if _, err := m.Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.GenerateCalls(); n != 1 {
		t.Fatalf("%d module calls for 3 identical requests, want 1", n)
	}
	req.Services[0].IPs = []string{"145.40.1.6"}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n := m.GenerateCalls(); n != 2 {
		t.Fatalf("%d module calls after a changed request, want 2", n)
	}
	// Failures are not memoized: every retry runs the module again.
	bad := load(t, hostile(t), "error")
	for range 2 {
		if _, err := bad.Generate(context.Background(), req); err == nil {
			t.Fatal("no error")
		}
	}
	if n := bad.GenerateCalls(); n != 2 {
		t.Fatalf("%d calls of a failing module for 2 requests, want 2", n)
	}
}

// Every call starts from the same pristine state: a module cannot observe
// anything a previous call did — its package variables, the input it saw,
// or the heap it grew. Concurrent calls are no different.
// TestNoStateSurvivesACall: each call of the "remember" mode leaves state
// behind (a counter, the input it saw, a grown heap, markers in the heap and
// in a global, stdout closed, an environment variable) and reports what it
// found on arrival: the next call must find none of it, and must start from
// the same clock and the same random stream, with reused instances (the
// pool) as with fresh ones.
func TestNoStateSurvivesACall(t *testing.T) {
	m := load(t, hostile(t), "remember")
	if !wasmhost.Pooled(m) {
		t.Fatal("the hostile module does not run on reused instances: this test would not test them")
	}
	var first map[string]any
	for i := range 4 {
		req := request()
		for range i {
			req.Nodes = append(req.Nodes, req.Nodes[0]) // a different input: no memoized answer
		}
		resp, err := m.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := resp.Objects[0]["data"].(map[string]any)
		if data["calls"] != "1" || data["seen"] != fmt.Sprint(len(req.Nodes)) {
			t.Fatalf("call %d saw state from an earlier call: %v", i+1, data)
		}
		if data["leaks"] != "0" || data["stdout"] != "true" || data["env"] != "" {
			t.Errorf("call %d found state from an earlier call: %v markers in memory, stdout works %v, env %q",
				i+1, data["leaks"], data["stdout"], data["env"])
		}
		if first == nil {
			first = data
			continue
		}
		for _, k := range []string{"heapSys", "clock", "rand"} {
			if data[k] != first[k] {
				t.Errorf("call %d starts with %s %v, the first with %v: state survived", i+1, k, data[k], first[k])
			}
		}
	}
	if n := m.GenerateCalls(); n != 4 {
		t.Fatalf("%d module calls, want 4", n)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := request()
			req.Services[0].Name = fmt.Sprintf("concurrent-%d", i)
			resp, err := m.Generate(context.Background(), req)
			if err != nil {
				t.Error(err)
				return
			}
			if data, _ := resp.Objects[0]["data"].(map[string]any); data["calls"] != "1" {
				t.Errorf("a concurrent call saw state from another: %v", data)
			}
		}()
	}
	wg.Wait()
}

// The sandbox: no filesystem, no network, no environment, a fake clock and
// a deterministic random source, the same in every fresh instance.
func TestSandbox(t *testing.T) {
	var seen []any
	for range 2 {
		m := load(t, hostile(t), "sandbox")
		resp, err := m.Generate(context.Background(), request())
		if err != nil {
			t.Fatal(err)
		}
		data := resp.Objects[0]["data"].(map[string]any)
		want := map[string]any{"file": "true", "net": "true", "env": "0", "year": "2022"}
		for k, v := range want {
			if data[k] != v {
				t.Errorf("%s = %v, want %v (data %v)", k, data[k], v, data)
			}
		}
		seen = append(seen, data["rand"])
	}
	if seen[0] != seen[1] {
		t.Errorf("random values differ between instances: %v", seen)
	}
}

// A module's log lines reach the host's slog.Logger at the module's level,
// tagged with the module's name, with the request's passwords scrubbed.
func TestModuleLogLines(t *testing.T) {
	var buf bytes.Buffer
	o := opts()
	o.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := wasmhost.LoadBytes(context.Background(), "hostile", hostile(t), sdk.Options{Params: map[string]string{"mode": "error"}}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	if _, err := m.Generate(context.Background(), request()); err == nil {
		t.Fatal("the error mode succeeded")
	}
	got := buf.String()
	if want := `level=WARN msg="about to fail with [redacted]" module=hostile`; !strings.Contains(got, want) {
		t.Errorf("log = %q, want a line containing %q", got, want)
	}
	if strings.Contains(got, fakePassword) {
		t.Errorf("log leaks the BGP password: %q", got)
	}
}
