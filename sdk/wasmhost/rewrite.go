package wasmhost

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The load-time rewrite of a module (instrument) does two things wazero
// cannot do cheaply itself:
//
//   - A deadline check at every loop header: a countdown global, and every
//     yieldEvery loop iterations a call of the module's own
//     wasi_snapshot_preview1.sched_yield import followed by a check of one
//     global the host sets when the call's deadline passes. wazero's
//     WithCloseOnContextDone does the same job with an exit to Go at every
//     loop header, which for Go guests (every Go function is a loop, for
//     goroutine resumption) roughly tripled the run time. The call into
//     Go is not optional: compiled guest code cannot be preempted (wazero's
//     RATIONALE.md), so a guest that never enters Go holds up every
//     stop-the-world of the host's garbage collector — including the one
//     that must let the goroutine setting the deadline flag run, which
//     deadlocks a looping guest. A module without that import keeps
//     wazero's instrumentation (the fallback below).
//   - The memory's initial size raised to the host's limit, so that a Go
//     guest (whose runtime takes the initial size as its heap's reserve)
//     never grows it: memory.size is the same on every call, and a reused
//     instance has nothing to tell about the size of an earlier call. The
//     pages cost nothing until touched (memory_mmap.go).
//   - Exports of every mutable global under a reserved name, so that the
//     host can snapshot them after the reactor's _initialize and put them
//     back before each call (see pool.go): wazero reads only exported
//     globals.
//
// The rewrite decodes every instruction. Anything it does not know (SIMD,
// threads, exceptions) makes it give up, and the host falls back to a
// fresh instance per call with wazero's own deadline instrumentation.

const (
	stopExport = "ccm.stop"
	// yieldEvery is how many loop iterations run between two calls into
	// Go: small enough that a garbage-collector pause waits microseconds
	// for the guest, large enough that the call costs nothing measurable.
	yieldEvery       = 4096
	globalExportPref = "ccm.global."
)

// instrumented is the result of instrument.
type instrumented struct {
	wasm []byte
	// stopGlobal is the index of the added deadline flag.
	stopGlobal uint32
	// globals are the exported names of the module's mutable globals.
	globals []string
	// stateful is set when the code can change state that survives a call
	// and is not in memory or globals (tables, dropped segments): such a
	// module gets a fresh instance per call.
	stateful bool
}

var errUnsupported = errors.New("unsupported WebAssembly feature")

type section struct {
	id   byte
	body []byte
}

// instrument rewrites a module; limitPages is the host's memory limit.
// wazero validates the result when compiling it.
//
// The steps are functions of their own so that their order, which
// matters, reads here: nothing is added before the scan has found the
// module's globals (the new ones take the next indexes), the exports
// name the new flag, and the code is rewritten once the flag's and the
// countdown's indexes are known.
func instrument(wasm []byte, limitPages uint32) (*instrumented, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, errors.New("not a WebAssembly module")
	}
	secs, err := readSections(wasm)
	if err != nil {
		return nil, err
	}
	sc, err := scanSections(secs, limitPages)
	if err != nil {
		return nil, err
	}
	if sc.exportSec < 0 {
		return nil, errors.New("no export section")
	}
	if sc.yield < 0 {
		return nil, fmt.Errorf("%w: no wasi_snapshot_preview1.sched_yield import of type () -> i32 to enter the host through", errUnsupported)
	}
	stop := sc.importedGlobals + sc.definedGlobals
	out := &instrumented{stopGlobal: stop}
	secs = addGlobals(secs, &sc)
	exports, globals, err := addExports(secs[sc.exportSec].body, stop, sc.mutable)
	if err != nil {
		return nil, err
	}
	secs[sc.exportSec].body, out.globals = exports, globals
	if out.stateful, err = instrumentCodeSections(secs, stop, uint32(sc.yield)); err != nil {
		return nil, err
	}
	out.wasm = encodeModule(wasm[:8], secs, len(wasm)+len(wasm)/8)
	return out, nil
}

// readSections splits the module after its 8-byte header into its
// sections, in their order, each body a slice of wasm.
func readSections(wasm []byte) ([]section, error) {
	r := &reader{b: wasm, i: 8}
	var secs []section
	for !r.done() {
		id := r.byte()
		n := r.u32()
		secs = append(secs, section{id: id, body: r.bytes(int(n))})
		if r.err != nil {
			return nil, r.err
		}
	}
	return secs, nil
}

// moduleScan is what instrument learns of a module's sections before it
// changes any of them but the memory's.
type moduleScan struct {
	importedGlobals, definedGlobals uint32
	// mutable are the indexes of the mutable globals the module defines.
	mutable []uint32
	// yield is the function index of the sched_yield import, -1 if none.
	yield int64
	// globalSec and exportSec are the indexes in the sections of the
	// global and export sections, -1 when the module has none.
	globalSec, exportSec int
}

// scanSections reads the type, import, global and export sections, and
// rewrites the memory section in place (raiseMemoryMin). The first
// section that does not parse is the error, in section order.
func scanSections(secs []section, limitPages uint32) (moduleScan, error) {
	sc := moduleScan{yield: -1, globalSec: -1, exportSec: -1}
	var types []byte
	for i, s := range secs {
		switch s.id {
		case 1:
			types = s.body
		case 2:
			g, y, err := scanImports(s.body, types)
			if err != nil {
				return sc, err
			}
			sc.importedGlobals, sc.yield = g, y
		case 6:
			sc.globalSec = i
			muts, n, err := mutableGlobals(s.body)
			if err != nil {
				return sc, err
			}
			sc.definedGlobals = n
			sc.mutable = muts
		case 5:
			body, err := raiseMemoryMin(s.body, limitPages)
			if err != nil {
				return sc, err
			}
			secs[i].body = body
		case 7:
			sc.exportSec = i
		}
	}
	return sc, nil
}

// addGlobals adds the new globals after the module's own, so no index
// moves: the deadline flag (mutable i32 = 0) and the countdown to the
// next call into Go (mutable i32 = yieldEvery). A module without a
// global section gets one, which moves the sections after it: sc's
// exportSec follows.
func addGlobals(secs []section, sc *moduleScan) []section {
	newGlobal := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b}
	newGlobal = append(append(append(newGlobal, 0x7f, 0x01, 0x41), sleb32(yieldEvery)...), 0x0b)
	if sc.globalSec >= 0 {
		secs[sc.globalSec].body = appendToVec(secs[sc.globalSec].body, sc.definedGlobals, 2, newGlobal)
		return secs
	}
	// Sections are ordered by id (custom ones aside): insert before the
	// first known section with a larger id.
	at := len(secs)
	for i, s := range secs {
		if s.id != 0 && s.id > 6 {
			at = i
			break
		}
	}
	secs = append(secs[:at], append([]section{{id: 6, body: append(uleb(2), newGlobal...)}}, secs[at:]...)...)
	if sc.exportSec >= at {
		sc.exportSec++
	}
	return secs
}

// addExports is the export section body with the deadline flag (global
// stop) exported as stopExport and every mutable global as
// globalExportPref and its index, after the module's own exports; and
// those globals' names, which the pool snapshots by (wazero reads only
// exported globals). A name the module already exports is an error.
func addExports(body []byte, stop uint32, mutable []uint32) ([]byte, []string, error) {
	er := &reader{b: body}
	count := er.u32()
	entries := er.i
	names := map[string]bool{}
	for i := uint32(0); i < count && er.err == nil; i++ {
		names[string(er.bytes(int(er.u32())))] = true
		er.byte()
		er.u32()
	}
	if er.err != nil {
		return nil, nil, er.err
	}
	var extra []byte
	add := func(name string, idx uint32) error {
		if names[name] {
			return fmt.Errorf("the module already exports %s", name)
		}
		extra = append(extra, uleb(uint32(len(name)))...)
		extra = append(extra, name...)
		extra = append(extra, 0x03)
		extra = append(extra, uleb(idx)...)
		count++
		return nil
	}
	if err := add(stopExport, stop); err != nil {
		return nil, nil, err
	}
	var globals []string
	for _, g := range mutable {
		name := fmt.Sprintf("%s%d", globalExportPref, g)
		if err := add(name, g); err != nil {
			return nil, nil, err
		}
		globals = append(globals, name)
	}
	return append(append(uleb(count), body[entries:]...), extra...), globals, nil
}

// instrumentCodeSections puts the deadline check into the code section
// (instrumentCode) and reports whether the code is stateful. A valid
// module has at most one code section; were there several, the last
// one's answer would be the module's, as it always was.
func instrumentCodeSections(secs []section, stop, yield uint32) (bool, error) {
	stateful := false
	for i, s := range secs {
		if s.id != 10 {
			continue
		}
		code, st, err := instrumentCode(s.body, stop, yield)
		if err != nil {
			return false, err
		}
		secs[i].body = code
		stateful = st
	}
	return stateful, nil
}

// encodeModule writes the header and the sections, each its id, its size
// and its body, into a buffer of capacity size.
func encodeModule(header []byte, secs []section, size int) []byte {
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.Write(header)
	for _, s := range secs {
		buf.WriteByte(s.id)
		buf.Write(uleb(uint32(len(s.body))))
		buf.Write(s.body)
	}
	return buf.Bytes()
}

// raiseMemoryMin sets the initial size of the module's one memory to
// limitPages (or its declared maximum, if lower).
func raiseMemoryMin(b []byte, limitPages uint32) ([]byte, error) {
	r := &reader{b: b}
	if r.u32() != 1 {
		return nil, errors.New("a module needs exactly one memory")
	}
	flags := r.byte()
	lo := r.u32()
	hi := limitPages
	if flags&1 != 0 {
		hi = min(hi, r.u32())
	}
	if flags&^1 != 0 || r.err != nil || !r.done() {
		return nil, errUnsupported // shared or 64-bit memory
	}
	out := append(uleb(1), flags)
	out = append(out, uleb(max(lo, hi))...)
	if flags&1 != 0 {
		out = append(out, uleb(hi)...)
	}
	return out, nil
}

func appendToVec(vec []byte, n, added uint32, items []byte) []byte {
	r := &reader{b: vec}
	r.u32()
	return append(append(uleb(n+added), vec[r.i:]...), items...)
}

// loopCheck is the code after every loop instruction:
//
//	countdown -= 1
//	if countdown == 0 {
//		drop(sched_yield())  // enters Go: a point where the host's GC may stop this goroutine
//		countdown = yieldEvery
//		if stop { unreachable }
//	}
func loopCheck(stop, countdown, yield uint32) []byte {
	var c []byte
	c = append(append(c, 0x23), uleb(countdown)...)    // global.get countdown
	c = append(c, 0x41, 0x01, 0x6b)                    // i32.const 1; i32.sub
	c = append(append(c, 0x24), uleb(countdown)...)    // global.set countdown
	c = append(append(c, 0x23), uleb(countdown)...)    // global.get countdown
	c = append(c, 0x45, 0x04, 0x40)                    // i32.eqz; if
	c = append(append(c, 0x10), uleb(yield)...)        // call sched_yield
	c = append(c, 0x1a)                                // drop
	c = append(append(c, 0x41), sleb32(yieldEvery)...) // i32.const yieldEvery
	c = append(append(c, 0x24), uleb(countdown)...)    // global.set countdown
	c = append(append(c, 0x23), uleb(stop)...)         // global.get stop
	c = append(c, 0x04, 0x40, 0x00, 0x0b)              // if; unreachable; end
	return append(c, 0x0b)                             // end
}

// scanImports counts the module's imported globals and finds the function
// index of its wasi_snapshot_preview1.sched_yield import, if it has one of
// type () -> i32 (-1 otherwise). types is the type section's body.
func scanImports(b, types []byte) (uint32, int64, error) {
	r := &reader{b: b}
	var globals, funcs uint32
	yield := int64(-1)
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		module := string(r.bytes(int(r.u32())))
		name := string(r.bytes(int(r.u32())))
		switch r.byte() {
		case 0x00: // func
			t := r.u32()
			if module == "wasi_snapshot_preview1" && name == "sched_yield" && isVoidToI32(types, t) {
				yield = int64(funcs)
			}
			funcs++
		case 0x01: // table: reftype, limits
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.byte()
			r.byte()
			globals++
		default:
			return 0, -1, errUnsupported
		}
	}
	return globals, yield, r.err
}

// isVoidToI32 reports whether type index t of the type section is
// () -> i32.
func isVoidToI32(types []byte, t uint32) bool {
	r := &reader{b: types}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if r.byte() != 0x60 {
			return false
		}
		params := r.bytes(int(r.u32()))
		results := r.bytes(int(r.u32()))
		if i == t {
			return r.err == nil && len(params) == 0 && len(results) == 1 && results[0] == 0x7f
		}
	}
	return false
}

// sleb32 is v as a signed LEB128 (the encoding of i32.const).
func sleb32(v int32) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// mutableGlobals returns the indexes of the mutable globals the module
// defines (counting imported ones first) and how many it defines.
func mutableGlobals(b []byte) ([]uint32, uint32, error) {
	r := &reader{b: b}
	n := r.u32()
	var muts []uint32
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.byte() // value type
		if r.byte() == 0x01 {
			muts = append(muts, i)
		}
		if _, err := skipExpr(r, math.MaxUint32, nil); err != nil {
			return nil, 0, err
		}
	}
	return muts, n, r.err
}

// instrumentCode inserts the deadline check after every loop instruction.
func instrumentCode(b []byte, stop, yield uint32) ([]byte, bool, error) {
	r := &reader{b: b}
	n := r.u32()
	out := make([]byte, 0, len(b)+len(b)/4)
	out = append(out, uleb(n)...)
	check := loopCheck(stop, stop+1, yield)
	stateful := false
	var fn []byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		body := &reader{b: r.bytes(int(size))}
		for l := body.u32(); l > 0 && body.err == nil; l-- {
			body.u32()
			body.byte()
		}
		// Copy the body in runs between loop instructions, the check
		// after each.
		fn, last := fn[:0], 0
		st, err := skipExpr(body, stop, func(_, end int, op byte) {
			if op == 0x03 {
				fn = append(fn, body.b[last:end]...)
				fn = append(fn, check...)
				last = end
			}
		})
		if err != nil {
			return nil, false, err
		}
		fn = append(fn, body.b[last:]...)
		stateful = stateful || st
		out = append(out, uleb(uint32(len(fn)))...)
		out = append(out, fn...)
	}
	return out, stateful, r.err
}

// skipExpr reads instructions up to the end of the expression, calling
// emit with each instruction's bytes. A global index ≥ maxGlobal is an
// error (the module cannot reach the globals the rewrite adds). It reports
// whether the code changes tables or segments.
func skipExpr(r *reader, maxGlobal uint32, emit func(start, end int, op byte)) (stateful bool, err error) {
	depth := 1
	for depth > 0 {
		if r.err != nil {
			return false, r.err
		}
		if r.done() {
			return false, errors.New("truncated code")
		}
		start := r.i
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			r.blockType()
			depth++
		case op == 0x0b: // end
			depth--
		case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
		case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || op == 0xd2:
			r.u32()
		case op == 0x0e: // br_table
			for k := r.u32(); k > 0 && r.err == nil; k-- {
				r.u32()
			}
			r.u32()
		case op == 0x11 || op == 0x13: // call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			r.bytes(int(r.u32()))
		case op >= 0x20 && op <= 0x22:
			r.u32()
		case op == 0x23 || op == 0x24:
			if g := r.u32(); g >= maxGlobal {
				return false, fmt.Errorf("global index %d out of range", g)
			}
		case op == 0x25:
			r.u32()
		case op == 0x26: // table.set
			r.u32()
			stateful = true
		case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
			if align := r.u32(); align&0x40 != 0 {
				return false, errUnsupported // multi-memory
			}
			r.u32()
		case op == 0x3f || op == 0x40:
			r.byte()
		case op == 0x41 || op == 0x42:
			r.sleb()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op >= 0x45 && op <= 0xc4: // numeric, sign extension
		case op == 0xd0:
			r.byte()
		case op == 0xfc:
			st, err := skipPrefixed(r)
			if err != nil {
				return false, err
			}
			stateful = stateful || st
		default:
			return false, fmt.Errorf("%w: opcode 0x%02x", errUnsupported, op)
		}
		if emit != nil && r.err == nil {
			emit(start, r.i, op)
		}
	}
	return stateful, r.err
}

func skipPrefixed(r *reader) (bool, error) {
	switch sub := r.u32(); {
	case sub <= 7: // saturating truncation
	case sub == 8: // memory.init: data, memory
		r.u32()
		r.byte()
		return true, nil
	case sub == 9, sub == 13: // data.drop, elem.drop
		r.u32()
		return true, nil
	case sub == 10: // memory.copy
		r.byte()
		r.byte()
	case sub == 11: // memory.fill
		r.byte()
	case sub == 12, sub == 14: // table.init, table.copy
		r.u32()
		r.u32()
		return true, nil
	case sub == 15, sub == 17: // table.grow, table.fill
		r.u32()
		return true, nil
	case sub == 16: // table.size
		r.u32()
	default:
		return false, fmt.Errorf("%w: opcode 0xfc %d", errUnsupported, sub)
	}
	return false, nil
}

// reader decodes the WebAssembly binary format; the first error sticks.
type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) done() bool { return r.i >= len(r.b) || r.err != nil }

func (r *reader) fail() {
	if r.err == nil {
		r.err = errors.New("truncated WebAssembly binary")
	}
	r.i = len(r.b)
}

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		r.fail()
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.i+n > len(r.b) {
		r.fail()
		return nil
	}
	r.i += n
	return r.b[r.i-n : r.i]
}

func (r *reader) u32() uint32 {
	v, n := binary.Uvarint(r.b[min(r.i, len(r.b)):])
	if n <= 0 || n > 5 || v > math.MaxUint32 {
		r.fail()
		return 0
	}
	r.i += n
	return uint32(v)
}

// sleb skips a signed LEB128 of up to 64 bits.
func (r *reader) sleb() {
	for k := 0; k < 10; k++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail()
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// blockType is 0x40 (empty), a value type, or a type index (s33).
func (r *reader) blockType() {
	if r.i < len(r.b) {
		switch r.b[r.i] {
		case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
			r.i++
			return
		}
	}
	r.sleb()
}

func uleb(v uint32) []byte { return binary.AppendUvarint(nil, uint64(v)) }
