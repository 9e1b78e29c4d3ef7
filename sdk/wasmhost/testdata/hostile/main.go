//go:build wasip1

// Command hostile is a module that misbehaves on purpose, in the way its
// "mode" option says. It speaks the ABI by hand (no SDK) so that it can break
// every rule the SDK would keep.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

//go:wasmimport ccm_lb_v1 input_len
func inputLen() int32

//go:wasmimport ccm_lb_v1 input_read
func inputRead(ptr unsafe.Pointer, n int32)

//go:wasmimport ccm_lb_v1 output_write
func outputWrite(ptr unsafe.Pointer, n int32)

//go:wasmimport ccm_lb_v1 error_write
func errorWrite(ptr unsafe.Pointer, n int32)

//go:wasmimport ccm_lb_v1 log
func logLine(level int32, ptr unsafe.Pointer, n int32)

func main() {}

// init runs in the reactor's _initialize, before any export: "initloop"
// never lets it finish.
func init() {
	switch read().Options.Params["mode"] {
	case "initloop":
		for {
		}
	case "initnilmap":
		var m map[string]int
		m["init"] = 1 // a runtime error in init: the load fails
	}
}

// The crash modes' functions stand on lines of their own, so that a test
// can name the file:line the host must report.

func panicInGoroutine() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		crash("boom in a goroutine")
	}()
	<-done
}

func crash(msg string) { panic(msg) }

func deadlock() { select {} }

// spin is not inlined, so that the wasm stack has a frame of its own for it.
//
//go:noinline
func spin() {
	for {
	}
}

type request struct {
	MemoryLimitBytes int64 `json:"memoryLimitBytes"`
	Options          struct {
		Params map[string]string `json:"params"`
	} `json:"options"`
	Nodes []struct {
		Peers []struct {
			Password string `json:"password"`
		} `json:"peers"`
	} `json:"nodes"`
}

func read() request {
	var r request
	_ = json.Unmarshal(input(), &r)
	return r
}

func input() []byte {
	in := make([]byte, inputLen())
	if len(in) > 0 {
		inputRead(unsafe.Pointer(&in[0]), int32(len(in)))
	}
	return in
}

// binaryMode is the mode of a generate request in the SDK's binary layout
// (what the host sends from ABI version 2 on), which this module does not
// decode: the two modes that speak those versions are found by their bytes.
func binaryMode(in []byte) string {
	for _, mode := range []string{"abi2", "abi3-badwire"} {
		if bytes.Contains(in, []byte("\x04mode"+string(rune(len(mode)))+mode)) {
			return mode
		}
	}
	return ""
}

func write(f func(unsafe.Pointer, int32), s string) {
	b := []byte(s)
	f(unsafe.Pointer(&b[0]), int32(len(b)))
}

// The host calls ccm_abi_version on the instance that then describes, so the
// describe request is already readable here.
//
//go:wasmexport ccm_abi_version
func abiVersion() int32 {
	switch read().Options.Params["mode"] {
	case "abi2":
		return 2 // a module built with the SDK before version 3
	case "abi3-badwire":
		return 3
	case "abi-future":
		return 7 // newer than any this host speaks
	}
	return 1
}

//go:wasmexport ccm_lb_describe
func describe() int32 {
	r := read()
	if r.Options.Params["mode"] == "describe-trap" {
		os.Exit(3)
	}
	annotate := "false"
	if r.Options.Params["mode"] == "annotate" {
		annotate = "true"
	}
	ns := `"hostile"`
	if r.Options.Params["mode"] == "no-namespace" {
		ns = `""` // the SDK README's skeleton without ?namespace=
	}
	write(outputWrite, `{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"DescribeResponse","name":"hostile","version":"0",`+
		`"emits":[{"apiVersion":"v1","kind":"ConfigMap","namespace":`+ns+`}],"nodeAnnotations":`+annotate+`}`)
	return 0
}

const okObject = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fine","namespace":"hostile"},"data":{"a":"b"}}`

var keep [][]byte

// remembered is what "remember" keeps from call to call, if the host let it.
var (
	calls      int
	remembered []string
	ballast    [][]byte
)

var lastMarker string

// scanForMarkers counts the markers of other calls ("LEAK-" and six
// digits) in linear memory below limit, which on the host's reused
// instances is the memory's whole size.
func scanForMarkers(limit int64) int {
	prefix := []byte("LEAK-")
	found := 0
	const chunk = 1 << 20
	for base := int64(4096); base < limit; base += chunk {
		// Overlap the next chunk by a marker's length.
		n := min(int64(chunk+11), limit-base)
		mem := unsafe.Slice((*byte)(unsafe.Pointer(uintptr(base))), n)
		for i := 0; ; {
			j := bytes.Index(mem[i:], prefix)
			if j < 0 || i+j+11 > len(mem) {
				break
			}
			i += j + 5
			if digits(mem[i : i+6]) {
				found++
			}
		}
	}
	return found
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func recurse(n int) int { return recurse(n+1) + 1 }

//go:wasmexport ccm_lb_generate
func generate() int32 {
	if in := input(); bytes.HasPrefix(in, []byte("CCMQ")) {
		switch binaryMode(in) {
		case "abi2": // binary request, JSON answer
			write(outputWrite, `{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[`+okObject+`]}`)
			return 0
		case "abi3-badwire": // a binary answer cut short
			write(outputWrite, "CCMR\x00\x00\x02\x06\x05")
			return 0
		}
		write(errorWrite, "a binary request in no binary mode")
		return 1
	}
	r := read()
	password := ""
	if len(r.Nodes) > 0 && len(r.Nodes[0].Peers) > 0 {
		password = r.Nodes[0].Peers[0].Password
	}
	objects := okObject
	switch r.Options.Params["mode"] {
	case "trap":
		debug.SetMaxStack(1 << 20)
		recurse(0)
	case "exit":
		os.Exit(3)
	case "loop":
		spin()
	case "gopanic":
		panicInGoroutine()
	case "nilmap":
		var m map[string]int
		m["x"] = 1
	case "deadlock":
		deadlock()
	case "membomb":
		for {
			keep = append(keep, make([]byte, 1<<20))
		}
	case "badjson":
		write(outputWrite, `{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[`)
		return 0
	case "undeclared":
		objects += `,{"apiVersion":"v1","kind":"Secret","metadata":{"name":"stolen","namespace":"hostile"}}`
	case "othernamespace":
		objects += `,{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"evil","namespace":"kube-system"}}`
	case "badschema":
		// Well-formed, declared, and refused by the API server: a number
		// where a ConfigMap holds strings.
		objects = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fine","namespace":"hostile"},"data":{"ip":5}}`
	case "ownlabel":
		objects = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fine","namespace":"hostile","labels":{"lb.metal.equinix.com/owned-by":"cloud-provider-equinix-metal"}}}`
	case "error":
		b := []byte("about to fail with " + password)
		logLine(2, unsafe.Pointer(&b[0]), int32(len(b)))
		write(errorWrite, "cannot work with password "+password)
		return 1
	case "sandbox":
		// Everything a module must not be able to reach, reported back.
		_, ferr := os.ReadFile("/etc/hostname")
		_, nerr := net.Dial("tcp", "127.0.0.1:443")
		report := fmt.Sprintf(`"file":%q,"net":%q,"env":"%d","year":"%d","rand":"%d"`,
			fmt.Sprint(ferr != nil), fmt.Sprint(nerr != nil), len(os.Environ()), time.Now().Year(), rand.Uint64())
		objects = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"sandbox","namespace":"hostile"},"data":{` + report + `}}`
	case "remember":
		// First what this call finds: the clock, the random stream,
		// stdout, the environment, and any marker an earlier call left
		// anywhere in linear memory.
		clock, random := time.Now().UnixNano(), rand.Uint64()
		_, werr := syscall.Write(1, []byte("."))
		leaks := scanForMarkers(r.MemoryLimitBytes)
		env := os.Getenv("HOSTILE_LEAK")
		// Then state a call leaves behind: a counter, the input it saw, a
		// grown heap, markers in the heap and in a global, a closed
		// stdout, an environment variable. The next call must see none
		// of it.
		marker := fmt.Sprintf("LEAK-%06d", 100000+len(r.Nodes))
		lastMarker = marker
		ballast = append(ballast, bytes.Repeat([]byte(marker), 1<<16))
		_ = syscall.Close(1)
		_ = os.Setenv("HOSTILE_LEAK", marker)
		calls++
		remembered = append(remembered, fmt.Sprint(len(r.Nodes)))
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap := ms.HeapSys
		ballast = append(ballast, make([]byte, 8<<20))
		objects = fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"remember","namespace":"hostile"},"data":{"calls":"%d","seen":%q,"heapSys":"%d",`+
			`"clock":"%d","rand":"%d","stdout":"%t","env":%q,"leaks":"%d"}}`,
			calls, strings.Join(remembered, ","), heap, clock, random, werr == nil, env, leaks)
	case "annotate":
		write(outputWrite, `{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[`+objects+`],"nodeAnnotations":{"worker-1":{"example.com/speaker":"on"}}}`)
		return 0
	case "bigoutput":
		b := make([]byte, 65<<20)
		outputWrite(unsafe.Pointer(&b[0]), int32(len(b)))
		return 0
	}
	write(outputWrite, `{"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[`+objects+`]}`)
	return 0
}
