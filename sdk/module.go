package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// Module is what a module registers: its identity, what it declares, and its
// generate handler.
type Module struct {
	Name    string
	Version string
	// Describe declares, for the given options, the kinds the module emits
	// and the objects it reads. Name, Version, APIVersion and Kind are
	// filled in for you.
	Describe func(Options) (Description, error)
	// Generate returns the complete desired state for a snapshot. It must be
	// pure: no clock, no randomness, no state kept between calls. Objects are
	// sorted for you; sort anything inside them yourself.
	Generate func(GenerateRequest) (GenerateResponse, error)
}

var registered *Module

// Register makes m the module that ccm_lb_describe and ccm_lb_generate run.
// Call it once, from an init function of the main package:
//
//	func init() { sdk.Register(sdk.Module{Name: "mine", Version: "0.1.0", Describe: describe, Generate: generate}) }
func Register(m Module) {
	if m.Describe == nil || m.Generate == nil || m.Name == "" {
		panic("sdk.Register: Module needs Name, Describe and Generate")
	}
	registered = &m
}

// Registered returns the registered module, or nil; tests use it to call the
// handlers natively.
func Registered() *Module { return registered }

// HandleDescribe runs m.Describe on a JSON DescribeRequest and returns the
// JSON Description. The wasip1 glue calls it; it is exported so that tests
// exercise exactly the code path the host does, minus the Wasm boundary.
func (m Module) HandleDescribe(input []byte) (out []byte, err error) {
	defer recoverInto(&err)
	var req DescribeRequest
	if err := decode(input, &req); err != nil {
		return nil, err
	}
	if err := checkEnvelope(req.APIVersion, req.Kind, KindDescribeRequest); err != nil {
		return nil, err
	}
	d, err := m.Describe(req.Options)
	if err != nil {
		return nil, err
	}
	d.APIVersion, d.Kind, d.Name, d.Version = APIVersion, KindDescribeResponse, m.Name, m.Version
	return json.Marshal(d)
}

// HandleGenerate runs m.Generate on a JSON GenerateRequest and returns the
// JSON GenerateResponse with its objects sorted by apiVersion, kind,
// namespace and name, so equal inputs give byte-identical outputs.
func (m Module) HandleGenerate(input []byte) (out []byte, err error) {
	defer recoverInto(&err)
	var req GenerateRequest
	if err := decode(input, &req); err != nil {
		return nil, err
	}
	return m.generate(req)
}

// HandleGenerateBinary is HandleGenerate for a request in the binary
// layout of EncodeGenerateRequest, which the host sends a module of this
// SDK's ABI version. The glue of version 2 called it; that of versions 3
// to 5 calls HandleGenerateWire.
func (m Module) HandleGenerateBinary(input []byte) (out []byte, err error) {
	defer recoverInto(&err)
	req, err := decodeBinaryRequest(input)
	if err != nil {
		return nil, err
	}
	return m.generate(req)
}

// HandleGenerateWire is HandleGenerateBinary answering in the binary
// layout of EncodeGenerateResponse: what the glue of ABI versions 3 to 5
// calls.
func (m Module) HandleGenerateWire(input []byte) (out []byte, err error) {
	defer recoverInto(&err)
	req, err := decodeBinaryRequest(input)
	if err != nil {
		return nil, err
	}
	resp, err := m.response(req)
	if err != nil {
		return nil, err
	}
	return EncodeGenerateResponse(resp)
}

// decodeBinaryRequest decodes a binary request once the guest's collector
// is set from its header (see requestMemoryLimit).
func decodeBinaryRequest(input []byte) (GenerateRequest, error) {
	tuneGC(requestMemoryLimit(input))
	return DecodeGenerateRequest(input)
}

func (m Module) generate(req GenerateRequest) ([]byte, error) {
	resp, err := m.response(req)
	if err != nil {
		return nil, err
	}
	return marshalResponse(resp)
}

// response runs the module's Generate on req and completes what it
// returns: the envelope, and the objects sorted.
func (m Module) response(req GenerateRequest) (GenerateResponse, error) {
	if err := checkEnvelope(req.APIVersion, req.Kind, KindGenerateRequest); err != nil {
		return GenerateResponse{}, err
	}
	tuneGC(req.MemoryLimitBytes)
	resp, err := m.Generate(req)
	if err != nil {
		return GenerateResponse{}, err
	}
	resp.APIVersion, resp.Kind = APIVersion, KindGenerateResponse
	if resp.Objects == nil {
		resp.Objects = []Object{}
	}
	SortObjects(resp.Objects)
	return resp, nil
}

// SortObjects sorts objects by apiVersion, kind, namespace and name.
func SortObjects(objs []Object) {
	// The keys are read once per object, not once per comparison (each
	// read is a few map lookups).
	type keyed struct {
		key [4]string
		obj Object
	}
	ks := make([]keyed, len(objs))
	for i, o := range objs {
		ks[i] = keyed{[4]string{o.APIVersion(), o.Kind(), o.Namespace(), o.Name()}, o}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		for i := range a.key {
			if c := strings.Compare(a.key[i], b.key[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	for i := range ks {
		objs[i] = ks[i].obj
	}
}

// decode is strict about trailing data and keeps numbers exact (json.Number)
// so that large integers in existing objects survive a round trip.
func decode(input []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding the host's request: %w", err)
	}
	if dec.More() {
		return errors.New("decoding the host's request: trailing data after the JSON document")
	}
	return nil
}

func checkEnvelope(apiVersion, kind, want string) error {
	if apiVersion != APIVersion || kind != want {
		return fmt.Errorf("the host sent %s %s, this module understands %s %s; rebuild the module with the SDK that matches the CCM", apiVersion, kind, APIVersion, want)
	}
	return nil
}

// recoverInto turns a panic into the call's error. The message names the
// function and file:line that panicked, since the error (in sdktest, or in
// the CCM's Event) is all an author sees of a module's crash: there is no
// stack trace on stderr when the SDK recovers.
func recoverInto(err *error) {
	if r := recover(); r != nil {
		if fn, file, line, ok := panicker(); ok {
			*err = fmt.Errorf("module panicked in %s (%s:%d): %v", fn, file, line, r)
			return
		}
		*err = fmt.Errorf("module panicked: %v", r)
	}
}

// panicker returns the frame that panicked, called from a deferred
// function during the panic: deferred calls run on top of the panicking
// goroutine's stack, so below runtime.gopanic lie the runtime's own frames
// (a nil map assignment, an index check) and then the code that panicked.
// The function keeps its last package path element and the file its base
// name (main.generate, main.go), short enough for an Event; -trimpath
// builds and local ones then read the same.
func panicker() (fn, file string, line int, ok bool) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	inPanic := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			inPanic = true
		case inPanic && f.Function != "" && !inRuntime(f.Function):
			return f.Function[strings.LastIndexByte(f.Function, '/')+1:],
				f.File[strings.LastIndexAny(f.File, `/\`)+1:], f.Line, true
		}
		if !more {
			return "", "", 0, false
		}
	}
}

// inRuntime reports whether fn is in the Go runtime, whose frames between
// gopanic and the code that panicked say nothing to a module's author.
func inRuntime(fn string) bool {
	return strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/runtime/") || strings.HasPrefix(fn, "runtime/internal/")
}
