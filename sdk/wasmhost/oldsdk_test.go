package wasmhost_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
)

// oldSDKCommit is the last commit whose SDK recovered a panic without
// naming where ("module panicked: …"): modules built with it are in use.
const oldSDKCommit = "01cfb5b8a657f1561bef67cc9648475421d7fbb7"

// TestOlderSDKCrashNamesWhere: a module built with an older SDK gets the
// place of a crash the SDK did not recover from the runtime's traceback,
// like a module built today. A panic that old SDK recovered printed no
// traceback: there the error says only what the module said, and the fix
// is a rebuild with today's SDK.
func TestOlderSDKCrashNamesWhere(t *testing.T) {
	wasm := buildWithOldSDK(t)
	src, err := os.ReadFile("testdata/oldsdk/main.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	crashLine := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "func crash()") {
			crashLine = i + 1
		}
	}
	for _, tc := range []struct {
		mode   string
		reason wasmhost.Reason
		want   string
	}{
		{"gopanic", wasmhost.ReasonTrap, "trapped: panic: boom from an old module, at main.crash (main.go:" + strconv.Itoa(crashLine) + ")"},
		{"panic", wasmhost.ReasonModuleError, "ccm_lb_generate failed: module panicked: boom from an old module"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			m, err := wasmhost.LoadBytes(context.Background(), "oldsdk", wasm, sdk.Options{Params: map[string]string{"mode": tc.mode}}, opts())
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			_, err = m.Generate(context.Background(), request())
			var me *wasmhost.Error
			if !errors.As(err, &me) || me.Reason != tc.reason || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a %s error containing %q", err, tc.reason, tc.want)
			}
		})
	}
}

// buildWithOldSDK builds testdata/oldsdk against the SDK of oldSDKCommit,
// read from the repository's history with git archive.
func buildWithOldSDK(t *testing.T) []byte {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: the old SDK comes from the repository's history")
	}
	if err := exec.Command("git", "cat-file", "-e", oldSDKCommit+"^{commit}").Run(); err != nil {
		t.Skipf("this clone lacks commit %s (a shallow clone?): the old SDK comes from the repository's history", oldSDKCommit[:7])
	}
	var archive, stderr bytes.Buffer
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	cmd := exec.Command("git", "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", oldSDKCommit, "sdk")
	cmd.Stdout, cmd.Stderr = &archive, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, stderr.Bytes())
	}
	dir := t.TempDir()
	tr := tar.NewReader(&archive)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || strings.HasSuffix(h.Name, "_test.go") || strings.Contains(h.Name, "/testdata/") {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, h.Name), b)
	}
	mod := filepath.Join(dir, "mod")
	src, err := os.ReadFile("testdata/oldsdk/main.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	// The same lines as main.go, so that the traceback's main.go:N is
	// line N of the testdata file.
	write(t, filepath.Join(mod, "main.go"), src)
	sum, err := os.ReadFile(filepath.Join(dir, "sdk", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(mod, "go.sum"), sum)
	write(t, filepath.Join(mod, "go.mod"), []byte("module oldsdkmodule\n\ngo 1.25.0\n\n"+
		"require github.com/metal-ccm/cloud-provider-equinix-metal/sdk v0.0.0\n\n"+
		"replace github.com/metal-ccm/cloud-provider-equinix-metal/sdk => ../sdk\n"))
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir = mod
	tidy.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=-mod=mod")
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	return sdktest.Build(t, mod)
}

func write(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
