// Package wasmhost runs load-balancer modules (ABI ccm_lb_v1) in wazero: it
// loads and verifies a module, calls it, and validates what it returns. It
// depends on wazero and the SDK only, so that sdktest (and a module author's
// go.mod) need nothing of the CCM; writing the output to a cluster is the
// CCM's job (host/lbmodule).
//
// A module is untrusted code: it is verified before first use (ABI version,
// exports, imports), starts every call from the same pristine state (a
// reused instance reset to its post-_initialize snapshot, see pool.go, or a
// fresh instance) with a memory limit and a deadline, and sees no
// filesystem, network, environment, real clock or real randomness (fake
// clocks and a deterministic random source, the same on every call). Its
// output is validated against what it declared, and against the schemas and
// size limits the API server enforces (sdk/internal/schema), before anything
// reaches Kubernetes, so a broken module changes nothing.
package wasmhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Defaults for Options left zero; they match the config defaults.
const (
	DefaultMemoryLimitMiB = 96
	DefaultTimeout        = 15 * time.Second
	// Go guests need 42 pages (2.6 MiB) before they run any code.
	minMemoryLimitMiB = 4
	pageSize          = 64 * 1024
)

// Options are the host-side limits of a module.
type Options struct {
	// CacheDir keeps compiled modules on disk (compiling a Go module takes
	// seconds; loading it from the cache tens of milliseconds). Empty keeps
	// them in memory only.
	CacheDir string
	// MemoryLimitMiB caps the module's linear memory per call.
	MemoryLimitMiB int
	// Timeout is the deadline of one call.
	Timeout time.Duration
	// Logger receives the module's log lines (sdk.LevelDebug, Info, Warn
	// and Error map onto slog's levels); slog.Default() if unset. The CCM
	// passes one that writes to klog.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MemoryLimitMiB == 0 {
		o.MemoryLimitMiB = DefaultMemoryLimitMiB
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Module is a loaded, verified module. It is safe for concurrent use: every
// call gets an instance of its own for its duration.
type Module struct {
	name    string // for messages: the built-in name or the file path
	sha256  string
	opts    Options
	options sdk.Options
	rt      wazero.Runtime
	cache   wazero.CompilationCache
	cm      wazero.CompiledModule
	desc    sdk.Description
	// abi is the ABI version the module speaks: 1 gets the generate
	// request as JSON, 2 in the SDK's binary layout, and 3 also answers in
	// the SDK's binary layout instead of JSON; 4 gets Service.Locations
	// and 5 IPv6 (encodeRequest).
	abi uint32
	// pool serves calls from reused instances when the module can be
	// instrumented (see rewrite.go and pool.go); nil means a fresh
	// instance per call.
	pool *pool

	// The module is pure, so the output of the last successful generate is
	// valid for the same input bytes: a resync of an unchanged cluster costs
	// a comparison instead of a Wasm call.
	memoMu sync.Mutex
	// memoIn is the input's SHA-256, not the input: at 10,000 Services
	// the request is megabytes, held for nothing but this comparison.
	memoIn  [sha256.Size]byte
	memoOut []byte
	calls   atomic.Uint64
}

// LoadBytes compiles and verifies a module from its bytes and calls its
// describe export with options. name is used in messages.
func LoadBytes(ctx context.Context, name string, wasm []byte, options sdk.Options, opts Options) (*Module, error) {
	opts = opts.withDefaults()
	if opts.MemoryLimitMiB < minMemoryLimitMiB {
		return nil, fmt.Errorf("load-balancer module memory limit %d MiB is too small; use at least %d", opts.MemoryLimitMiB, minMemoryLimitMiB)
	}
	sum := sha256.Sum256(wasm)
	m := &Module{name: name, sha256: hex.EncodeToString(sum[:]), opts: opts, options: options}

	cache, err := compilationCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	m.cache = cache
	ok := false
	defer func() {
		if !ok && m.rt != nil {
			_ = m.Close(context.Background())
		}
	}()
	if err := m.compileAndVerify(ctx, wasm); err != nil {
		return nil, err
	}
	if err := m.callDescribe(ctx, options); err != nil {
		return nil, err
	}
	ok = true
	return m, nil
}

// loadError is a failure of LoadBytes that names the module.
func (m *Module) loadError(format string, args ...any) error {
	return fmt.Errorf("load-balancer module %s: %s", m.name, fmt.Sprintf(format, args...))
}

// compileAndVerify compiles wasm into m's runtime and checks its imports
// and exports. A module the rewrite understands gets the cheap deadline
// check and reused instances; any other the fresh-instance path with
// wazero's deadline instrumentation. On an error m.rt may be set: the
// caller closes it.
func (m *Module) compileAndVerify(ctx context.Context, wasm []byte) error {
	ins, ierr := instrument(wasm, uint32(m.opts.MemoryLimitMiB*(1<<20)/pageSize))
	pooled := ierr == nil && !ins.stateful
	code := wasm
	if pooled {
		code = ins.wasm
	}
	err := m.compile(ctx, code, pooled)
	if pooled && (err != nil || !sandboxable(m.cm)) {
		// It imports WASI functions beyond the sandbox's (or the rewrite
		// is at fault): start over on the fresh-instance path.
		_ = m.rt.Close(ctx)
		pooled = false
		err = m.compile(ctx, wasm, false)
	}
	if err != nil {
		return m.loadError("%v", err)
	}
	if pooled {
		// The pool needs what instrument found, not the rewritten module:
		// compiled, its bytes (4 MB for a built-in) are garbage.
		ins.wasm = nil
		m.pool = newPool(m, m.cm, ins)
	}
	if err := verify(m.cm); err != nil {
		return m.loadError("%v", err)
	}
	return nil
}

// callDescribe checks the module's ABI version and calls its describe
// export with options, keeping the checked description in m.desc. One
// instance does both (an instance costs milliseconds): describe runs only
// if the version matches.
func (m *Module) callDescribe(ctx context.Context, options sdk.Options) error {
	in, err := json.Marshal(sdk.DescribeRequest{APIVersion: sdk.APIVersion, Kind: sdk.KindDescribeRequest, Options: options})
	if err != nil {
		return err
	}
	out, err := m.call(ctx, exportDescribe, in, nil, m.checkABI)
	if err != nil {
		return err
	}
	if err := decodeStrict(out, &m.desc); err != nil {
		return m.loadError("describe returned invalid JSON (%v); return the output of sdk.Module.HandleDescribe", err)
	}
	if err := ValidateDescription(m.desc); err != nil {
		return m.loadError("describe: %v", err)
	}
	return nil
}

// checkABI reads the ABI version mod speaks into m.abi, and refuses one
// this host does not speak.
func (m *Module) checkABI(ctx context.Context, mod api.Module) error {
	res, err := mod.ExportedFunction(exportABIVersion).Call(ctx)
	if err != nil {
		return err
	}
	v := api.DecodeU32(res[0])
	if v < sdk.MinABIVersion || v > sdk.ABIVersion {
		return &Error{Module: m.name, Reason: ReasonModuleError, Msg: fmt.Sprintf("speaks ABI version %d, this CCM speaks %d to %d; rebuild the module with the SDK of this CCM", v, sdk.MinABIVersion, sdk.ABIVersion)}
	}
	m.abi = v
	return nil
}

// withoutLocations is req as a module of ABI version 1 got it, before
// Service.Locations: the same JSON bytes as then. req's Services are not
// changed (they are the caller's).
func withoutLocations(req sdk.GenerateRequest) sdk.GenerateRequest {
	if !slices.ContainsFunc(req.Services, func(s sdk.Service) bool { return s.Locations != nil }) {
		return req
	}
	svcs := make([]sdk.Service, len(req.Services))
	for i, s := range req.Services {
		s.Locations = nil
		svcs[i] = s
	}
	req.Services = svcs
	return req
}

// withoutIPv6 is req as a module of ABI version 4 or older got it, before
// IPv6 reached modules: the IPv6 addresses of each Service's IPs and
// Locations left out, a Service left with no address left out (its
// address family is one that module cannot serve), and each node without
// its IPv6 peers and SourceIPv6. An IPv4-only request is returned as it
// is, so such a module gets exactly the bytes it got before. req is not
// changed (its slices are the caller's).
func withoutIPv6(req sdk.GenerateRequest) sdk.GenerateRequest {
	v6Service := func(s sdk.Service) bool {
		return slices.ContainsFunc(s.IPs, sdk.IsIPv6) || slices.ContainsFunc(s.Locations, func(l sdk.AddressLocation) bool { return sdk.IsIPv6(l.IP) })
	}
	v6Node := func(n sdk.Node) bool {
		return n.SourceIPv6 != "" || slices.ContainsFunc(n.Peers, func(p sdk.Peer) bool { return sdk.IsIPv6(p.IP) })
	}
	if slices.ContainsFunc(req.Services, v6Service) {
		svcs := make([]sdk.Service, 0, len(req.Services))
		for _, s := range req.Services {
			if !v6Service(s) {
				svcs = append(svcs, s)
				continue
			}
			s.IPs = filter(s.IPs, func(ip string) bool { return !sdk.IsIPv6(ip) })
			if len(s.IPs) == 0 {
				continue
			}
			s.Locations = filter(s.Locations, func(l sdk.AddressLocation) bool { return !sdk.IsIPv6(l.IP) })
			svcs = append(svcs, s)
		}
		req.Services = svcs
	}
	if slices.ContainsFunc(req.Nodes, v6Node) {
		nodes := make([]sdk.Node, len(req.Nodes))
		for i, n := range req.Nodes {
			if v6Node(n) {
				n.SourceIPv6 = ""
				n.Peers = filter(n.Peers, func(p sdk.Peer) bool { return !sdk.IsIPv6(p.IP) })
			}
			nodes[i] = n
		}
		req.Nodes = nodes
	}
	return req
}

// filter is a new slice of the elements of s that keep: nil when s is nil,
// empty (not nil) when s is not nil but none is kept, as a list that JSON
// writes even empty (Node.Peers) then encodes as it did.
func filter[T any](s []T, keep func(T) bool) []T {
	if s == nil {
		return nil
	}
	out := make([]T, 0, len(s))
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// encodeRequest is the generate request as a module of ABI version abi
// decodes it: the layout of its version, and nothing it was not built for
// (see sdk.ABIVersion).
func encodeRequest(abi uint32, req sdk.GenerateRequest) ([]byte, error) {
	if abi < 6 {
		req = withoutMultihop(req)
	}
	if abi < 5 {
		req = withoutIPv6(req)
	}
	switch {
	case abi < 2:
		return json.Marshal(withoutLocations(req))
	case abi < 4:
		return sdk.EncodeGenerateRequestV2(req)
	case abi < 5:
		return sdk.EncodeGenerateRequestV4(req)
	case abi < 6:
		return sdk.EncodeGenerateRequestV5(req)
	}
	return sdk.EncodeGenerateRequest(req)
}

// withoutMultihop is req as a module of ABI version 5 or older got it:
// every peer's Multihop false. Such a module's layout has no place for it
// (version 1's JSON would carry it, to a decoder that may refuse a name it
// does not know). req is not changed; a request without a multihop peer is
// returned as it is.
func withoutMultihop(req sdk.GenerateRequest) sdk.GenerateRequest {
	multihop := func(n sdk.Node) bool {
		return slices.ContainsFunc(n.Peers, func(p sdk.Peer) bool { return p.Multihop })
	}
	if !slices.ContainsFunc(req.Nodes, multihop) {
		return req
	}
	nodes := make([]sdk.Node, len(req.Nodes))
	for i, n := range req.Nodes {
		if multihop(n) {
			peers := make([]sdk.Peer, len(n.Peers))
			for j, p := range n.Peers {
				p.Multihop = false
				peers[j] = p
			}
			n.Peers = peers
		}
		nodes[i] = n
	}
	req.Nodes = nodes
	return req
}

// compile makes the runtime for the module and compiles code in it.
func (m *Module) compile(ctx context.Context, code []byte, pooled bool) error {
	rc := wazero.NewRuntimeConfigCompiler().
		WithMemoryLimitPages(uint32(m.opts.MemoryLimitMiB * (1 << 20) / pageSize)).
		WithCloseOnContextDone(!pooled).
		WithCompilationCache(m.cache)
	m.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	wasi := func(ctx context.Context, rt wazero.Runtime) error {
		_, err := wasi_snapshot_preview1.Instantiate(ctx, rt)
		return err
	}
	if pooled {
		wasi = instantiateSandboxWASI
	}
	if err := wasi(ctx, m.rt); err != nil {
		return fmt.Errorf("starting the WASI host for load-balancer modules: %w", err)
	}
	if err := m.instantiateHost(ctx); err != nil {
		return err
	}
	var err error
	m.cm, err = m.rt.CompileModule(ctx, code)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "over limit") {
			return fmt.Errorf("needs more memory than moduleMemoryLimitMiB=%d allows (%s); raise moduleMemoryLimitMiB", m.opts.MemoryLimitMiB, msg)
		}
		return fmt.Errorf("is not a valid WebAssembly module (%s); build it with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared", msg)
	}
	return nil
}

func compilationCache(dir string) (wazero.CompilationCache, error) {
	if dir == "" {
		return wazero.NewCompilationCache(), nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("moduleCacheDir %s cannot be used (%v); point it at a writable directory, or leave it empty to cache in memory", dir, err)
	}
	return c, nil
}

// Name is the built-in's name or the module file's path.
func (m *Module) Name() string { return m.name }

// SHA256 is the hex digest of the module's bytes.
func (m *Module) SHA256() string { return m.sha256 }

// Options are what the module receives from the loadbalancer URL.
func (m *Module) Options() sdk.Options { return m.options }

// Describe is what the module declared at load time.
func (m *Module) Describe() sdk.Description { return m.desc }

// GenerateCalls counts the generate calls that ran the module, as opposed
// to those answered from the memoized output.
func (m *Module) GenerateCalls() uint64 { return m.calls.Load() }

// Close frees the runtime and its compiled code (an on-disk cache stays).
func (m *Module) Close(ctx context.Context) error {
	if m.pool != nil {
		m.pool.close()
	}
	err := m.rt.Close(ctx)
	if cerr := m.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// Generate runs the module's generate export on req and validates the
// output. A request byte-identical to the last successful one reuses that
// output without calling the module (it is pure by contract); the output is
// still decoded and validated against the declaration and the request (the
// schema checks, which depend on the output alone, passed when it was
// fresh). The host fills req's envelope and options. Any failure is an
// *Error whose Reason says what went wrong; the output is then unusable and
// nothing should be applied.
func (m *Module) Generate(ctx context.Context, req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
	req.APIVersion, req.Kind, req.Options = sdk.APIVersion, sdk.KindGenerateRequest, m.options
	req.MemoryLimitBytes = int64(m.opts.MemoryLimitMiB) << 20
	in, err := encodeRequest(m.abi, req)
	if err != nil {
		return sdk.GenerateResponse{}, err
	}
	red := newRedactor(req)
	inSum := sha256.Sum256(in)
	m.memoMu.Lock()
	out := m.memoOut
	if inSum != m.memoIn {
		out = nil
	}
	m.memoMu.Unlock()
	fresh := out == nil
	if fresh {
		m.calls.Add(1)
		if out, err = m.call(ctx, exportGenerate, in, red, nil); err != nil {
			return sdk.GenerateResponse{}, err
		}
	}
	var resp sdk.GenerateResponse
	if m.abi >= 3 {
		if resp, err = decodeWireResponse(out); err != nil {
			return sdk.GenerateResponse{}, m.errorf(ReasonInvalidOutput, "generate returned an invalid binary response: %s; return the output of sdk.Module.HandleGenerateWire", red.clean(err.Error()))
		}
	} else if resp, err = decodeResponse(out); err != nil {
		return sdk.GenerateResponse{}, m.errorf(ReasonInvalidOutput, "generate returned invalid JSON: %s; return the output of sdk.Module.HandleGenerate", red.clean(err.Error()))
	}
	// Output from the memo passed every check when it was fresh, and the
	// checks against schemas and size limits depend on its bytes alone:
	// only the checks against the declaration and the request run again.
	if err := validateOutput(m.desc, req, resp, fresh); err != nil {
		var ve *ValidationError
		reason := ReasonInvalidOutput
		if errors.As(err, &ve) && ve.Forbidden {
			reason = ReasonForbiddenOutput
		}
		return sdk.GenerateResponse{}, m.errorf(reason, "%s; nothing was applied, fix the module (its author's bug) or its describe", red.clean(err.Error()))
	}
	for i, w := range resp.Warnings {
		resp.Warnings[i] = red.clean(w)
	}
	if fresh {
		m.memoMu.Lock()
		m.memoIn, m.memoOut = inSum, out
		m.memoMu.Unlock()
	}
	return resp, nil
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

// call runs one export from the pristine state: no state survives between
// calls, and a trap or a deadline only ever destroys that instance.
func (m *Module) call(ctx context.Context, export string, input []byte, red *redactor, before func(context.Context, api.Module) error) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.Timeout)
	defer cancel()
	st := &callState{input: input, red: red, logger: m.opts.Logger.With("module", m.name)}
	var res []uint64
	var err error
	if m.pool != nil {
		res, err = m.pool.run(ctx, st, export, before)
	} else {
		res, err = m.callFresh(ctx, st, export, before)
	}
	if err != nil {
		if me := (*Error)(nil); errors.As(err, &me) {
			return nil, err
		}
		return nil, m.classify(ctx, err, st)
	}
	if st.fault != nil {
		return nil, m.errorf(ReasonInvalidOutput, "%v", st.fault)
	}
	if status := api.DecodeI32(res[0]); status != 0 {
		msg := strings.TrimSpace(st.red.clean(st.errText.String()))
		if msg == "" {
			msg = fmt.Sprintf("status %d without an error message", status)
		}
		return nil, m.errorf(ReasonModuleError, "%s failed: %s", export, OneLine(msg))
	}
	return st.output.Bytes(), nil
}

// callFresh runs export in an instance made for this call alone.
func (m *Module) callFresh(ctx context.Context, st *callState, export string, before func(context.Context, api.Module) error) ([]uint64, error) {
	mod, err := m.instantiate(ctx, st)
	if err != nil {
		return nil, err
	}
	defer func() { _ = mod.Close(context.Background()) }() // the call is over: nothing to report
	if before != nil {
		if err := before(withState(ctx, st), mod); err != nil {
			return nil, err
		}
	}
	return mod.ExportedFunction(export).Call(withState(ctx, st))
}

func (m *Module) instantiate(ctx context.Context, st *callState) (api.Module, error) {
	// The default ModuleConfig has no filesystem, arguments or environment,
	// fake clocks and a deterministic random source: exactly the sandbox a
	// pure function needs.
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize").
		WithStderr(&st.stderr).
		WithStdout(&st.stdout)
	return m.rt.InstantiateModule(withState(ctx, st), m.cm, cfg)
}

// classify turns a wazero failure into an *Error with the right Reason.
// A crash names where the module was (crash.go): the error, in sdktest,
// the CCM's Event or plan, is all an author sees of it.
func (m *Module) classify(ctx context.Context, err error, st *callState) error {
	var exit *sys.ExitError
	c := readCrash(st.stderr.String(), err.Error())
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || (errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded):
		return m.errorf(ReasonDeadline, "did not finish within %s%s; make it faster or raise moduleTimeout", m.opts.Timeout, where(" (stopped in %s)", c.site))
	case ctx.Err() != nil:
		return ctx.Err()
	case st.fault != nil:
		return m.errorf(ReasonInvalidOutput, "%v", st.fault)
	case strings.Contains(st.stderr.String(), "out of memory"):
		return m.errorf(ReasonMemory, "ran out of memory (limit %d MiB)%s; raise moduleMemoryLimitMiB or make the module use less", m.opts.MemoryLimitMiB, where(", at %s", c.site))
	}
	var detail string
	switch {
	case c.headline != "" && c.site != "":
		detail = OneLine(c.headline) + ", at " + c.site
	case c.headline != "":
		detail = OneLine(c.headline)
	default:
		detail = OneLine(err.Error())
		if line := firstLine(st.stderr.String()); line != "" {
			detail = line + " (" + detail + ")"
		}
	}
	return m.errorf(ReasonTrap, "trapped: %s; the module has a bug, fix it or report it to its author", st.red.clean(detail))
}

// where formats site into format, or is empty when the site is unknown.
func where(format, site string) string {
	if site == "" {
		return ""
	}
	return fmt.Sprintf(format, site)
}

func (m *Module) errorf(r Reason, format string, args ...any) *Error {
	return &Error{Module: m.name, Reason: r, Msg: fmt.Sprintf(format, args...)}
}

// OneLine folds s onto one line of at most 400 bytes, for error messages
// that quote another program's output.
func OneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return OneLine(l)
		}
	}
	return ""
}
