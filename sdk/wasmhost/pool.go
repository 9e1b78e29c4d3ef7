package wasmhost

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// pool keeps instances of a module that have run its reactor's _initialize
// (booting the Go runtime costs milliseconds) and puts each one back into
// the state it had right after _initialize before it serves another call:
// linear memory copied from a snapshot, every mutable global reset. What a
// call could change outside memory and globals is not there: the module's
// code does not touch tables or segments (instrument checks), and its WASI
// is the stateless sandboxWASI. An instance whose memory grew during a call
// is discarded, since its memory.size would tell the next call how much the
// previous one used; so is one that trapped or hit its deadline.
type pool struct {
	m   *Module
	cm  wazero.CompiledModule
	ins *instrumented

	pages   uint32   // memory size after _initialize, in pages
	memory  []byte   // memory contents after _initialize, up to the last non-zero page
	globals []uint64 // mutable globals after _initialize, in ins.globals order

	idle    chan *warm
	closeMu sync.RWMutex
	closed  bool
}

// warm is one instance and its handles.
type warm struct {
	mod     api.Module
	mem     api.Memory
	lm      linearMemory
	stop    api.MutableGlobal
	globals []api.MutableGlobal
}

func newPool(m *Module, cm wazero.CompiledModule, ins *instrumented) *pool {
	return &pool{m: m, cm: cm, ins: ins, idle: make(chan *warm, max(2, runtime.GOMAXPROCS(0)))}
}

// get returns a pristine instance: an idle one, or a new one.
func (p *pool) get(ctx context.Context, st *callState) (*warm, error) {
	select {
	case w := <-p.idle:
		return w, nil
	default:
	}
	return p.instantiate(ctx, st)
}

// instantiate makes an instance. The first runs _initialize and becomes the
// snapshot; later ones skip it and get the snapshot copied in, which is the
// same state without booting the Go runtime again.
func (p *pool) instantiate(ctx context.Context, st *callState) (*warm, error) {
	first := p.memory == nil
	// No start function: the first instance's _initialize is called below,
	// once the deadline can stop it.
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	w := &warm{}
	ctx = experimental.WithMemoryAllocator(withState(ctx, st), experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		w.lm = newLinearMemory(max)
		return w.lm
	}))
	mod, err := p.m.rt.InstantiateModule(ctx, p.cm, cfg)
	if err != nil {
		return nil, err
	}
	w.mod, w.mem = mod, mod.Memory()
	var ok bool
	if w.stop, ok = mod.ExportedGlobal(stopExport).(api.MutableGlobal); !ok {
		_ = mod.Close(ctx)
		return nil, fmt.Errorf("instrumented module lacks %s", stopExport)
	}
	for _, name := range p.ins.globals {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("instrumented module lacks %s", name)
		}
		w.globals = append(w.globals, g)
	}
	if first {
		if init := mod.ExportedFunction("_initialize"); init != nil {
			stopTimer := context.AfterFunc(ctx, func() { w.stop.Set(1) })
			_, err := init.Call(ctx)
			stopTimer()
			if err != nil {
				_ = mod.Close(context.Background())
				return nil, err
			}
		}
		p.pages = w.mem.Size() / pageSize
		buf, _ := w.mem.Read(0, w.mem.Size())
		p.memory = append([]byte(nil), buf[:usedExtent(buf[:min(len(buf), w.lm.touched())])]...)
		for _, g := range w.globals {
			p.globals = append(p.globals, g.Get())
		}
		return w, nil
	}
	if have := w.mem.Size() / pageSize; have < p.pages {
		if _, ok := w.mem.Grow(p.pages - have); !ok {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("cannot grow a new instance to %d pages", p.pages)
		}
	}
	if !p.reset(w) {
		_ = mod.Close(ctx)
		return nil, fmt.Errorf("a new instance does not have the snapshot's memory size")
	}
	return w, nil
}

// reset puts w back into the snapshot's state, or reports that it cannot.
func (p *pool) reset(w *warm) bool {
	if w.mem.Size() != p.pages*pageSize {
		return false
	}
	buf, ok := w.mem.Read(0, w.mem.Size())
	if !ok {
		return false
	}
	copy(buf, p.memory)
	w.lm.zero(uint64(len(p.memory)), uint64(len(buf)))
	for i, g := range w.globals {
		g.Set(p.globals[i])
	}
	w.stop.Set(0)
	return true
}

// put takes w back after a call: reset and idle if it finished cleanly and
// its memory did not grow, closed otherwise.
func (p *pool) put(w *warm, clean bool) {
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if !p.closed && clean && w.stop.Get() == 0 && p.reset(w) {
		select {
		case p.idle <- w:
			return
		default:
		}
	}
	_ = w.mod.Close(context.Background())
}

// close closes the idle instances; later puts close theirs.
func (p *pool) close() {
	p.closeMu.Lock()
	p.closed = true
	p.closeMu.Unlock()
	for {
		select {
		case w := <-p.idle:
			_ = w.mod.Close(context.Background())
		default:
			return
		}
	}
}

// run calls export on a pooled instance. The deadline sets the instance's
// stop flag, which the instrumented code checks at every loop header.
func (p *pool) run(ctx context.Context, st *callState, export string, before func(context.Context, api.Module) error) ([]uint64, error) {
	w, err := p.get(ctx, st)
	if err != nil {
		return nil, err
	}
	stopTimer := context.AfterFunc(ctx, func() { w.stop.Set(1) })
	res, err := p.call(withState(ctx, st), w, export, before)
	// A timer that fired, or is firing, may still set the flag: such an
	// instance never serves again.
	clean := stopTimer() && err == nil && st.fault == nil
	p.put(w, clean)
	return res, err
}

func (p *pool) call(ctx context.Context, w *warm, export string, before func(context.Context, api.Module) error) ([]uint64, error) {
	if before != nil {
		if err := before(ctx, w.mod); err != nil {
			return nil, err
		}
	}
	return w.mod.ExportedFunction(export).Call(ctx)
}

// usedExtent is the length of buf up to its last non-zero 64 KiB page.
func usedExtent(buf []byte) int {
	end := len(buf)
	for end > 0 {
		start := end - pageSize
		if start < 0 {
			start = 0
		}
		for _, b := range buf[start:end] {
			if b != 0 {
				return end
			}
		}
		end = start
	}
	return 0
}
