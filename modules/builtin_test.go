package modules

import (
	"bytes"
	"strings"
	"testing"
)

func TestBuiltin(t *testing.T) {
	if _, err := Builtin("haproxy"); err == nil || !strings.Contains(err.Error(), `there is no built-in load-balancer module "haproxy"`) {
		t.Errorf("unknown module: %v", err)
	}
	for _, name := range Names {
		b, err := Builtin(name)
		switch {
		case err != nil:
			// Not built (a fresh clone): the error must say how to fix it.
			if !strings.Contains(err.Error(), "run make modules") {
				t.Errorf("%s: %v", name, err)
			}
		case !bytes.HasPrefix(b, []byte("\x00asm")):
			t.Errorf("%s is embedded but is not WebAssembly", name)
		}
	}
}
