package wasmhost

import (
	"path"
	"reflect"
	"strconv"
	"strings"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// Where a guest crashed. The SDK's own recover names the panicking frame,
// but only for a panic in the export's goroutine of a module built with
// it. Everything else — a panic in another goroutine, a fatal error of the
// runtime (deadlock, out of memory, stack overflow), a module built with
// an older SDK or none — ends the guest with the Go runtime's traceback on
// its stderr, which the host keeps (the first maxStdioBytes) and reads
// here. A call the host stops at its deadline prints nothing; there the
// only witness is the wasm stack wazero attaches to the trap, which names
// functions but not lines (Go writes no DWARF for wasm).

// crash is what the host can tell of a crash.
type crash struct {
	// headline is the runtime's first line: "panic: …" or "fatal error: …".
	headline string
	// site is the first frame of the module's own code, "" if none was found.
	site string
}

// sdkPackage is the SDK's import path: its frames (the export wrappers,
// the decoder) are never the place a module author should look.
var sdkPackage = reflect.TypeOf(sdk.Options{}).PkgPath()

// readCrash reads the Go runtime's traceback in stderr and, failing that,
// the wasm stack trace in wazero's error text.
func readCrash(stderr, wasmErr string) crash {
	var c crash
	lines := strings.Split(stderr, "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			c.headline = strings.TrimSpace(l)
			break
		}
	}
	c.site = tracebackSite(lines)
	if c.site == "" {
		c.site = wasmStackSite(wasmErr)
	}
	return c
}

// tracebackSite returns the first user frame of the first goroutine that
// has one, as "pkg.func (file.go:line)". The runtime prints the crashing
// goroutine first; "runtime stack:" blocks (the system stack of a fatal
// error) hold runtime frames only and are passed over by the same rule.
func tracebackSite(lines []string) string {
	for i := 0; i+1 < len(lines); i++ {
		fn, ok := frameFunc(lines[i])
		if !ok || !strings.HasPrefix(lines[i+1], "\t") {
			continue
		}
		file, line, ok := frameFile(lines[i+1])
		i++
		if !ok || !userFunc(fn) || strings.HasPrefix(file, "<") {
			continue
		}
		return short(fn) + " (" + path.Base(file) + ":" + strconv.Itoa(line) + ")"
	}
	return ""
}

// frameFunc reads a traceback's function line: "main.crash(...)",
// "runtime.(*mcache).allocLarge(0x2, 0x1)". A "created by" line names the
// goroutine's creator, not where it crashed.
func frameFunc(l string) (string, bool) {
	if l == "" || l[0] == '\t' || l[0] == ' ' || strings.HasPrefix(l, "created by ") || !strings.HasSuffix(l, ")") {
		return "", false
	}
	i := strings.LastIndex(l, "(")
	if i <= 0 || strings.ContainsAny(l[:i], " \t") {
		return "", false
	}
	return l[:i], true
}

// frameFile reads the line under a function: "\tpath/main.go:65 +0x4 …".
func frameFile(l string) (string, int, bool) {
	l = strings.TrimSpace(l)
	if i := strings.IndexByte(l, ' '); i >= 0 {
		l = l[:i]
	}
	i := strings.LastIndexByte(l, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(l[i+1:])
	if err != nil {
		return "", 0, false
	}
	return l[:i], n, true
}

// wasmStackSite returns the first user function of the wasm stack trace
// wazero appends to a trap's error ("wasm stack trace:\n\t.main.f(i32) i32").
func wasmStackSite(errText string) string {
	_, trace, ok := strings.Cut(errText, "wasm stack trace:")
	if !ok {
		return ""
	}
	for _, l := range strings.Split(trace, "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), ".")
		i := strings.IndexByte(l, '(')
		if i <= 0 {
			continue
		}
		if fn := l[:i]; userFunc(fn) {
			return short(fn)
		}
	}
	return ""
}

// userFunc reports whether fn belongs to the module's own code: not the
// standard library (whose import paths have no dot in the first element,
// "main" aside), not the SDK, not the glue the Go toolchain generates for
// wasm (wasm_pc_f_loop, _rt0_wasm_wasip1) or the exports.
func userFunc(fn string) bool {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return false
	}
	pkg := fn[:slash+1+dot]
	if pkg == sdkPackage || strings.HasPrefix(pkg, sdkPackage+"/") {
		return false
	}
	first, _, _ := strings.Cut(pkg, "/")
	return pkg == "main" || strings.Contains(first, ".")
}

// short keeps the function's last package path element (main.generate,
// metallb.build), as the SDK's recover does: short enough for an Event.
func short(fn string) string { return fn[strings.LastIndexByte(fn, '/')+1:] }
