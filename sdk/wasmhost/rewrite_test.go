package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// spinModule is (module (import "wasi_snapshot_preview1" "sched_yield"
// (func (result i32))) (memory 1) (func (export "spin") (loop (br 0)))),
// with code as the function body after its locals.
func spinModule(code ...byte) []byte {
	body := append([]byte{0x00}, code...)
	b := []byte("\x00asm\x01\x00\x00\x00")
	b = append(b, 0x01, 0x08, 0x02, 0x60, 0x00, 0x00, 0x60, 0x00, 0x01, 0x7f) // types () -> (), () -> i32
	imp := append([]byte{0x01, 22}, "wasi_snapshot_preview1"...)
	imp = append(append(append(imp, 11), "sched_yield"...), 0x00, 0x01)
	b = append(append(b, 0x02, byte(len(imp))), imp...)
	b = append(b, 0x03, 0x02, 0x01, 0x00)       // one function of type 0 (index 1)
	b = append(b, 0x05, 0x03, 0x01, 0x00, 0x01) // memory, min 1 page
	b = append(b, 0x07, 0x08, 0x01, 0x04, 's', 'p', 'i', 'n', 0x00, 0x01)
	b = append(b, 0x0a, byte(len(body)+2), 0x01, byte(len(body)))
	return append(b, body...)
}

// The rewritten module stops looping when the host sets the flag, starts
// with the memory at the limit, and exports its mutable globals. The loop
// enters Go through sched_yield, and it is stopped while another goroutine
// forces garbage collections: compiled guest code cannot be preempted, so
// a loop that never entered Go would hold every stop-the-world (and the
// goroutine that sets the flag) until it ended, which it never would.
func TestInstrumentStopsALoop(t *testing.T) {
	ins, err := instrument(spinModule(0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b), 4)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	var yields atomic.Int64
	if _, err := rt.NewHostModuleBuilder("wasi_snapshot_preview1").NewFunctionBuilder().
		WithFunc(func() int32 { yields.Add(1); return 0 }).Export("sched_yield").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	gcDone := make(chan struct{})
	defer close(gcDone)
	go func() {
		for {
			select {
			case <-gcDone:
				return
			default:
				runtime.GC()
			}
		}
	}()
	mod, err := rt.Instantiate(ctx, ins.wasm)
	if err != nil {
		t.Fatal(err)
	}
	if got := mod.Memory().Size(); got != 4*pageSize {
		t.Errorf("memory is %d bytes, want the limit of 4 pages", got)
	}
	stop, ok := mod.ExportedGlobal(stopExport).(api.MutableGlobal)
	if !ok {
		t.Fatalf("no mutable %s export", stopExport)
	}
	time.AfterFunc(100*time.Millisecond, func() { stop.Set(1) })
	done := make(chan error, 1)
	go func() { _, err := mod.ExportedFunction("spin").Call(ctx); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("the loop ended with %v, want the unreachable trap", err)
		}
		if yields.Load() == 0 {
			t.Error("the loop never entered Go through sched_yield")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the loop did not stop")
	}
}

// What the rewrite does not understand sends the module down the
// fresh-instance path instead of being rewritten wrongly; so does a module
// without a sched_yield import to enter Go through.
func TestInstrumentRefusesWhatItDoesNotKnow(t *testing.T) {
	noYield := spinModule(0x0b)
	noYield[bytes.Index(noYield, []byte("sched_yield"))] = 'X' // now Xched_yield
	if _, err := instrument(noYield, 4); !errors.Is(err, errUnsupported) {
		t.Errorf("no sched_yield import: %v, want errUnsupported", err)
	}
	for name, code := range map[string][]byte{
		"SIMD":      {0xfd, 0x0c, 0x0b},
		"truncated": {0x03, 0x40},
		"exception": {0x06, 0x40, 0x0b, 0x0b},
	} {
		if _, err := instrument(spinModule(code...), 4); err == nil {
			t.Errorf("%s: rewritten", name)
		}
	}
	if _, err := instrument(spinModule(0xfd, 0x0c, 0x0b), 4); !errors.Is(err, errUnsupported) {
		t.Errorf("SIMD: %v, want errUnsupported", err)
	}
	// table.set makes instances stateful: no reuse.
	ins, err := instrument(spinModule(0x41, 0x00, 0xd0, 0x70, 0x26, 0x00, 0x0b), 4)
	if err != nil || !ins.stateful {
		t.Errorf("table.set: %v, stateful %v", err, ins != nil && ins.stateful)
	}
}
