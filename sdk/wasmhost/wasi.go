package wasmhost

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// sandboxWASI is the part of WASI (preview 1) a Go module built with the
// SDK imports, for modules whose instances are reused (pool.go). wazero's
// own WASI keeps state in the instance (open file descriptors and their
// flags, a clock and a random source that advance), which a reused instance
// would carry from one call to the next. Here every function is stateless
// or reads its state from the call (callState), so each call starts from
// the same clock and random stream, and the sandbox is the one wazero's
// defaults gave: no arguments, no environment, no files, stdin empty,
// stdout and stderr captured, fake clocks, deterministic randomness.
//
// Every other WASI function answers ENOSYS (or EBADF when its first
// argument is a descriptor) and changes nothing. A module importing a
// function this table does not know (or with another signature) runs with
// wazero's WASI and a fresh instance per call instead.

// WASI errno values.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoNosys   = 52
	errnoNotsup  = 58
)

const (
	// Like wazero's fake clocks: the wall clock starts at 2022-01-01 and
	// every read of either clock advances it by 1 ms.
	fakeEpochNanos = 1640995200000000000
	fakeTickNanos  = 1_000_000
	randSeed       = 42
)

// wasiState is one call's clock and random stream.
type wasiState struct {
	ticks uint64
	rng   *rand.ChaCha8
}

func (w *wasiState) next() uint64 {
	w.ticks++
	return w.ticks * fakeTickNanos
}

func (w *wasiState) read(p []byte) {
	if w.rng == nil {
		var seed [32]byte
		seed[0] = randSeed
		w.rng = rand.NewChaCha8(seed)
	}
	_, _ = w.rng.Read(p)
}

var i64 = api.ValueTypeI64

// sandboxWASIFuncs are the functions sandboxWASI provides, by name.
type wasiFunc struct {
	params, results []api.ValueType
	fn              api.GoModuleFunc
}

var sandboxWASIFuncs = map[string]wasiFunc{
	"sched_yield":         {nil, []api.ValueType{i32}, success},
	"proc_exit":           {[]api.ValueType{i32}, nil, procExit},
	"args_get":            {[]api.ValueType{i32, i32}, []api.ValueType{i32}, success},
	"args_sizes_get":      {[]api.ValueType{i32, i32}, []api.ValueType{i32}, zeroSizes},
	"environ_get":         {[]api.ValueType{i32, i32}, []api.ValueType{i32}, success},
	"environ_sizes_get":   {[]api.ValueType{i32, i32}, []api.ValueType{i32}, zeroSizes},
	"clock_time_get":      {[]api.ValueType{i32, i64, i32}, []api.ValueType{i32}, clockTimeGet},
	"random_get":          {[]api.ValueType{i32, i32}, []api.ValueType{i32}, randomGet},
	"fd_write":            {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, fdWrite},
	"fd_read":             {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, fdRead},
	"fd_close":            {[]api.ValueType{i32}, []api.ValueType{i32}, stdioOnly(errnoNotsup)},
	"fd_fdstat_get":       {[]api.ValueType{i32, i32}, []api.ValueType{i32}, fdFdstatGet},
	"fd_fdstat_set_flags": {[]api.ValueType{i32, i32}, []api.ValueType{i32}, stdioOnly(errnoNotsup)},
	"fd_prestat_get":      {[]api.ValueType{i32, i32}, []api.ValueType{i32}, errno(errnoBadf)},
	"fd_prestat_dir_name": {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}, errno(errnoBadf)},
	"poll_oneoff":         {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, pollOneoff},
}

// The rest of WASI preview 1, by signature: "f" marks a first argument that
// is a descriptor; then one letter per parameter (i: i32, I: i64).
var wasiStubs = map[string]string{
	"clock_res_get": "ii", "fd_advise": "fiIIi", "fd_allocate": "fiII", "fd_datasync": "fi",
	"fd_fdstat_set_rights": "fiII", "fd_filestat_get": "fii", "fd_filestat_set_size": "fiI",
	"fd_filestat_set_times": "fiIIi", "fd_pread": "fiiiIi", "fd_pwrite": "fiiiIi", "fd_readdir": "fiiiIi",
	"fd_renumber": "fii", "fd_seek": "fiIii", "fd_sync": "fi", "fd_tell": "fii",
	"path_create_directory": "fiii", "path_filestat_get": "fiiiii", "path_filestat_set_times": "fiiiiIIi",
	"path_link": "fiiiiiii", "path_open": "fiiiiiIIii", "path_readlink": "fiiiiii", "path_remove_directory": "fiii",
	"path_rename": "fiiiiii", "path_symlink": "iiiii", "path_unlink_file": "fiii", "proc_raise": "i",
	"sock_accept": "fiii", "sock_recv": "fiiiiii", "sock_send": "fiiiii", "sock_shutdown": "fii",
}

func init() {
	for name, sig := range wasiStubs {
		e := uint32(errnoNosys)
		if sig[0] == 'f' {
			e, sig = errnoBadf, sig[1:]
		}
		var params []api.ValueType
		for _, c := range sig {
			params = append(params, map[rune]api.ValueType{'i': i32, 'I': i64}[c])
		}
		sandboxWASIFuncs[name] = wasiFunc{params, []api.ValueType{i32}, errno(e)}
	}
}

// sandboxable reports whether sandboxWASI provides every WASI function the
// module imports, with the right signature.
func sandboxable(cm wazero.CompiledModule) bool {
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wasiModule {
			continue
		}
		w, ok := sandboxWASIFuncs[name]
		if !ok || !sameTypes(f.ParamTypes(), w.params) || !sameTypes(f.ResultTypes(), w.results) {
			return false
		}
	}
	return true
}

func instantiateSandboxWASI(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(wasiModule)
	for name, f := range sandboxWASIFuncs {
		b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func errno(e uint32) api.GoModuleFunc {
	return func(_ context.Context, _ api.Module, stack []uint64) { stack[0] = uint64(e) }
}

var success = errno(errnoSuccess)

// stdioOnly answers e for stdin, stdout and stderr and EBADF for any other
// descriptor; it never changes anything.
func stdioOnly(e uint32) api.GoModuleFunc {
	return func(_ context.Context, _ api.Module, stack []uint64) {
		if uint32(stack[0]) > 2 {
			stack[0] = errnoBadf
			return
		}
		stack[0] = uint64(e)
	}
}

func procExit(ctx context.Context, mod api.Module, stack []uint64) {
	code := uint32(stack[0])
	_ = mod.CloseWithExitCode(ctx, code)
	panic(sys.NewExitError(code))
}

func writeU32s(mod api.Module, vals ...[2]uint32) bool {
	for _, v := range vals {
		if !mod.Memory().WriteUint32Le(v[0], v[1]) {
			return false
		}
	}
	return true
}

func zeroSizes(_ context.Context, mod api.Module, stack []uint64) {
	if !writeU32s(mod, [2]uint32{uint32(stack[0]), 0}, [2]uint32{uint32(stack[1]), 0}) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

func clockTimeGet(ctx context.Context, mod api.Module, stack []uint64) {
	id, ptr := uint32(stack[0]), uint32(stack[2])
	var t uint64
	switch id {
	case 0: // realtime
		t = fakeEpochNanos + stateFrom(ctx).wasi.next()
	case 1: // monotonic
		t = stateFrom(ctx).wasi.next()
	default:
		stack[0] = errnoInval
		return
	}
	if !mod.Memory().WriteUint64Le(ptr, t) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

func randomGet(ctx context.Context, mod api.Module, stack []uint64) {
	buf, ok := mod.Memory().Read(uint32(stack[0]), uint32(stack[1]))
	if !ok {
		stack[0] = errnoFault
		return
	}
	stateFrom(ctx).wasi.read(buf)
	stack[0] = errnoSuccess
}

// iovecs calls f with each buffer of a WASI iovec array.
func iovecs(mod api.Module, iovs, n uint32, f func([]byte)) (uint32, bool) {
	var total uint32
	for i := uint32(0); i < n; i++ {
		ptr, ok1 := mod.Memory().ReadUint32Le(iovs + i*8)
		l, ok2 := mod.Memory().ReadUint32Le(iovs + i*8 + 4)
		b, ok3 := mod.Memory().Read(ptr, l)
		if !ok1 || !ok2 || !ok3 {
			return 0, false
		}
		f(b)
		total += l
	}
	return total, true
}

func fdWrite(ctx context.Context, mod api.Module, stack []uint64) {
	fd, iovs, n, result := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	st := stateFrom(ctx)
	var w *limitedBuffer
	switch fd {
	case 1:
		w = &st.stdout
	case 2:
		w = &st.stderr
	default:
		stack[0] = errnoBadf
		return
	}
	total, ok := iovecs(mod, iovs, n, func(b []byte) { _, _ = w.Write(b) })
	if !ok || !mod.Memory().WriteUint32Le(result, total) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// fdRead reads nothing: stdin is empty.
func fdRead(_ context.Context, mod api.Module, stack []uint64) {
	if uint32(stack[0]) != 0 {
		stack[0] = errnoBadf
		return
	}
	if !mod.Memory().WriteUint32Le(uint32(stack[3]), 0) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

func fdFdstatGet(_ context.Context, mod api.Module, stack []uint64) {
	fd, ptr := uint32(stack[0]), uint32(stack[1])
	if fd > 2 {
		stack[0] = errnoBadf
		return
	}
	// filetype character_device, no flags, every right.
	var stat [24]byte
	stat[0] = 2
	binary.LittleEndian.PutUint64(stat[8:], ^uint64(0))
	binary.LittleEndian.PutUint64(stat[16:], ^uint64(0))
	if !mod.Memory().Write(ptr, stat[:]) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// pollOneoff answers every subscription at once: clocks have expired (the
// clocks are fake, so a sleep takes no time), descriptors are not pollable.
func pollOneoff(_ context.Context, mod api.Module, stack []uint64) {
	in, out, n, result := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	if n == 0 {
		stack[0] = errnoInval
		return
	}
	for i := uint32(0); i < n; i++ {
		sub, ok := mod.Memory().Read(in+i*48, 48)
		if !ok {
			stack[0] = errnoFault
			return
		}
		var ev [32]byte
		copy(ev[:8], sub[:8]) // userdata
		ev[10] = sub[8]       // type
		if sub[8] != 0 {
			binary.LittleEndian.PutUint16(ev[8:], errnoBadf)
		}
		if !mod.Memory().Write(out+i*32, ev[:]) {
			stack[0] = errnoFault
			return
		}
	}
	if !mod.Memory().WriteUint32Le(result, n) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}
