package wasmhost

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// The ABI (ccm_lb_v1): what the SDK's wasip1 glue imports and exports.
const (
	importModule     = "ccm_lb_v1"
	wasiModule       = "wasi_snapshot_preview1"
	exportABIVersion = "ccm_abi_version"
	exportDescribe   = "ccm_lb_describe"
	exportGenerate   = "ccm_lb_generate"

	// Caps on what one call may hand the host.
	maxOutputBytes = 64 << 20
	maxErrorBytes  = 4 << 10
	maxStdioBytes  = 16 << 10
	maxLogLines    = 100
	maxLogLine     = 1 << 10
)

var (
	i32 = api.ValueTypeI32
	// hostImports are the functions the host provides, with their exact
	// signatures (params, results).
	hostImports = map[string][2][]api.ValueType{
		"input_len":    {nil, {i32}},
		"input_read":   {{i32, i32}, nil},
		"output_write": {{i32, i32}, nil},
		"error_write":  {{i32, i32}, nil},
		"log":          {{i32, i32, i32}, nil},
	}
	requiredExports = map[string][2][]api.ValueType{
		exportABIVersion: {nil, {i32}},
		exportDescribe:   {nil, {i32}},
		exportGenerate:   {nil, {i32}},
	}
)

// callState is one call's I/O, reached by the host functions through the
// context, so one compiled module serves concurrent calls.
type callState struct {
	input    []byte
	output   bytes.Buffer
	errText  bytes.Buffer
	stderr   limitedBuffer
	stdout   limitedBuffer
	red      *redactor
	logger   *slog.Logger
	logLines int
	// wasi is the sandbox WASI's clock and random stream for this call.
	wasi wasiState
	// fault is a protocol violation by the guest (oversized output, bad
	// pointer); it fails the call even if the guest returns 0.
	fault error
}

type stateKey struct{}

func withState(ctx context.Context, st *callState) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

func stateFrom(ctx context.Context) *callState {
	st, _ := ctx.Value(stateKey{}).(*callState)
	if st == nil {
		return &callState{logger: slog.New(slog.DiscardHandler)}
	}
	return st
}

func (m *Module) instantiateHost(ctx context.Context) error {
	b := m.rt.NewHostModuleBuilder(importModule)
	fn := func(name string, f api.GoModuleFunc) {
		sig := hostImports[name]
		b.NewFunctionBuilder().WithGoModuleFunction(f, sig[0], sig[1]).Export(name)
	}
	fn("input_len", func(ctx context.Context, _ api.Module, stack []uint64) {
		stack[0] = api.EncodeI32(int32(len(stateFrom(ctx).input)))
	})
	fn("input_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		st := stateFrom(ctx)
		ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
		if int(n) > len(st.input) {
			n = uint32(len(st.input))
		}
		if !mod.Memory().Write(ptr, st.input[:n]) {
			panic(fmt.Errorf("input_read(%d, %d) is outside the module's memory", ptr, n))
		}
	})
	sink := func(name string, dst func(*callState) *bytes.Buffer, limit int) {
		fn(name, func(ctx context.Context, mod api.Module, stack []uint64) {
			st := stateFrom(ctx)
			ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
			buf := dst(st)
			if buf.Len()+int(n) > limit {
				st.fault = fmt.Errorf("wrote more than %d bytes with %s", limit, name)
				panic(st.fault)
			}
			b, ok := mod.Memory().Read(ptr, n)
			if !ok {
				st.fault = fmt.Errorf("%s(%d, %d) is outside the module's memory", name, ptr, n)
				panic(st.fault)
			}
			buf.Write(b)
		})
	}
	sink("output_write", func(st *callState) *bytes.Buffer { return &st.output }, maxOutputBytes)
	sink("error_write", func(st *callState) *bytes.Buffer { return &st.errText }, maxErrorBytes)
	fn("log", func(ctx context.Context, mod api.Module, stack []uint64) {
		st := stateFrom(ctx)
		level, ptr, n := api.DecodeI32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
		if st.logLines >= maxLogLines {
			return
		}
		st.logLines++
		if n > maxLogLine {
			n = maxLogLine
		}
		b, ok := mod.Memory().Read(ptr, n)
		if !ok {
			return
		}
		st.logger.Log(ctx, slogLevel(sdk.Level(level)), st.red.clean(string(b)))
	})
	_, err := b.Instantiate(ctx)
	return err
}

// slogLevel maps a module's log level onto slog's; anything unknown is an
// error, so that a module cannot hide a line by inventing a level.
func slogLevel(l sdk.Level) slog.Level {
	switch l {
	case sdk.LevelDebug:
		return slog.LevelDebug
	case sdk.LevelInfo:
		return slog.LevelInfo
	case sdk.LevelWarn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// verify checks a compiled module against the ABI before any of its code
// runs: the three exports with their exact signatures, an exported memory,
// a reactor (not a command), and imports only from WASI and ccm_lb_v1.
func verify(cm wazero.CompiledModule) error {
	exports := cm.ExportedFunctions()
	var problems []string
	names := make([]string, 0, len(requiredExports))
	for n := range requiredExports {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		sig := requiredExports[name]
		f, ok := exports[name]
		if !ok {
			problems = append(problems, "does not export "+name)
			continue
		}
		if !sameTypes(f.ParamTypes(), sig[0]) || !sameTypes(f.ResultTypes(), sig[1]) {
			problems = append(problems, fmt.Sprintf("exports %s with the wrong signature", name))
		}
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		problems = append(problems, "exports no memory")
	}
	if _, ok := exports["_initialize"]; !ok {
		if _, cmd := exports["_start"]; cmd {
			problems = append(problems, "is a command, not a reactor")
		}
	}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case wasiModule:
		case importModule:
			sig, ok := hostImports[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("imports %s.%s, which the host does not provide", mod, name))
			} else if !sameTypes(f.ParamTypes(), sig[0]) || !sameTypes(f.ResultTypes(), sig[1]) {
				problems = append(problems, fmt.Sprintf("imports %s.%s with the wrong signature", mod, name))
			}
		default:
			problems = append(problems, fmt.Sprintf("imports %s.%s; modules may import only from %s and %s", mod, name, wasiModule, importModule))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("does not follow the ccm_lb_v1 ABI: it %s; build it with the SDK (sdk.Register) and GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared", strings.Join(problems, ", "))
	}
	return nil
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// limitedBuffer keeps the first bytes written and drops the rest, so a
// chatty module cannot grow the host's memory.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxStdioBytes - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// redactor removes the request's BGP passwords (and their base64, which is
// what node annotations carry) from any text a module produces, so that a
// module echoing its input cannot leak one into a log, event or error.
type redactor struct{ r *strings.Replacer }

func newRedactor(req sdk.GenerateRequest) *redactor {
	seen := map[string]bool{}
	var pairs []string
	for _, n := range req.Nodes {
		for _, p := range n.Peers {
			for _, s := range []string{string(p.Password), base64.StdEncoding.EncodeToString([]byte(p.Password))} {
				if s != "" && !seen[s] {
					seen[s] = true
					pairs = append(pairs, s)
				}
			}
		}
	}
	// Longest first, so that a password containing another is removed whole.
	sort.Slice(pairs, func(i, j int) bool { return len(pairs[i]) > len(pairs[j]) })
	var args []string
	for _, p := range pairs {
		args = append(args, p, "[redacted]")
	}
	if len(args) == 0 {
		return nil
	}
	return &redactor{r: strings.NewReplacer(args...)}
}

func (r *redactor) clean(s string) string {
	if r == nil {
		return s
	}
	return r.r.Replace(s)
}
