package wasmhost

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// spinModule is (module (memory 1) (func (export "spin") (loop (br 0)))),
// with code as the function body after its locals.
func spinModule(code ...byte) []byte {
	body := append([]byte{0x00}, code...)
	b := []byte("\x00asm\x01\x00\x00\x00")
	b = append(b, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00) // type () -> ()
	b = append(b, 0x03, 0x02, 0x01, 0x00)             // one function of type 0
	b = append(b, 0x05, 0x03, 0x01, 0x00, 0x01)       // memory, min 1 page
	b = append(b, 0x07, 0x08, 0x01, 0x04, 's', 'p', 'i', 'n', 0x00, 0x00)
	b = append(b, 0x0a, byte(len(body)+2), 0x01, byte(len(body)))
	return append(b, body...)
}

// The rewritten module stops looping when the host sets the flag, starts
// with the memory at the limit, and exports its mutable globals.
func TestInstrumentStopsALoop(t *testing.T) {
	ins, err := instrument(spinModule(0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b), 4)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
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
	case <-time.After(20 * time.Second):
		t.Fatal("the loop did not stop")
	}
}

// What the rewrite does not understand sends the module down the
// fresh-instance path instead of being rewritten wrongly.
func TestInstrumentRefusesWhatItDoesNotKnow(t *testing.T) {
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
