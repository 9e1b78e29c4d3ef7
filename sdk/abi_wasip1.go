//go:build wasip1

package sdk

import "unsafe"

// The ccm_lb_v1 imports. The guest owns every buffer: it asks for the input
// length, allocates, and has the host copy into that slice while the Go frame
// holding it is live, so nothing needs pinning and no malloc is exported.

//go:wasmimport ccm_lb_v1 input_len
func hostInputLen() int32

//go:wasmimport ccm_lb_v1 input_read
func hostInputRead(ptr unsafe.Pointer, n int32)

//go:wasmimport ccm_lb_v1 output_write
func hostOutputWrite(ptr unsafe.Pointer, n int32)

//go:wasmimport ccm_lb_v1 error_write
func hostErrorWrite(ptr unsafe.Pointer, n int32)

//go:wasmimport ccm_lb_v1 log
func hostLog(level int32, ptr unsafe.Pointer, n int32)

//go:wasmexport ccm_abi_version
func ccmABIVersion() int32 { return ABIVersion }

//go:wasmexport ccm_lb_describe
func ccmLBDescribe() int32 { return call(Module.HandleDescribe) }

//go:wasmexport ccm_lb_generate
func ccmLBGenerate() int32 { return call(Module.HandleGenerateWire) }

func call(handle func(Module, []byte) ([]byte, error)) int32 {
	if registered == nil {
		writeError("no module registered; call sdk.Register from an init function of package main")
		return 1
	}
	in := make([]byte, hostInputLen())
	if len(in) > 0 {
		hostInputRead(unsafe.Pointer(&in[0]), int32(len(in)))
	}
	out, err := handle(*registered, in)
	if err != nil {
		writeError(err.Error())
		return 1
	}
	if len(out) > 0 {
		hostOutputWrite(unsafe.Pointer(&out[0]), int32(len(out)))
	}
	return 0
}

func writeError(msg string) {
	b := []byte(msg)
	if len(b) == 0 {
		b = []byte("unknown error")
	}
	hostErrorWrite(unsafe.Pointer(&b[0]), int32(len(b)))
}

func writeLog(level Level, msg string) {
	if msg == "" {
		return
	}
	b := []byte(msg)
	hostLog(int32(level), unsafe.Pointer(&b[0]), int32(len(b)))
}
