package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The packages mk/tools.mk builds from k8sbins (build-k8s); e2e.test's own
// test-only packages are left out.
var k8sbinsPackages = []string{
	"k8s.io/kubernetes/cmd/kube-apiserver",
	"k8s.io/kubernetes/cmd/kubelet",
	"k8s.io/kubernetes/cmd/kube-proxy",
	"k8s.io/kubernetes/cmd/kube-controller-manager",
	"k8s.io/kubernetes/cmd/kube-scheduler",
	"k8s.io/kubernetes/cmd/kubectl",
	"k8s.io/kubernetes/test/images/agnhost",
	"go.etcd.io/etcd/server/v3",
}

// modulesOfDeps returns, for every package the given packages of the module
// in dir compile (tests too with -test), the module@version it comes from,
// listed as the Makefile builds both: CGO_ENABLED=0.
func modulesOfDeps(t *testing.T, dir string, args ...string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}@{{.Version}}{{end}}"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps in %s: %v: %s", dir, err, stderr.String())
	}
	deps := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "path module@version"; a test variant ("path [path.test] ...")
		// and a package of no module (the standard library) are not shared.
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			deps[f[0]] = f[1]
		}
	}
	return deps
}

// TestK8sbinsSharesTheCCMsPackages holds what makes a cold make test cheaper:
// every package that both the CCM and the k8sbins binaries compile comes
// from one module version in both, so the one compiled for kube-apiserver
// is the one the CCM's tests link (mk/tools.mk, build-k8s). A dependency
// raised in the root go.mod and not in k8sbins would compile everything
// above it twice again, silently; this names it.
func TestK8sbinsSharesTheCCMsPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("lists every package of both modules (go list, a few seconds)")
	}
	ccm := modulesOfDeps(t, filepath.Join("..", ".."), "-test", "./...")
	bins := modulesOfDeps(t, "k8sbins", k8sbinsPackages...)
	shared, differ := 0, map[string]bool{}
	for pkg, mod := range ccm {
		other, ok := bins[pkg]
		if !ok {
			continue
		}
		shared++
		if other != mod {
			differ[fmt.Sprintf("%s (the CCM) and %s (k8sbins)", mod, other)] = true
		}
	}
	if len(differ) > 0 {
		list := make([]string, 0, len(differ))
		for d := range differ {
			list = append(list, d)
		}
		sort.Strings(list)
		t.Fatalf("k8sbins and the CCM compile %d modules at different versions, so Go compiles the packages above them twice:\n  %s\n"+
			"run `go run ./hack/k8sbinsmods -write` at the repository's root (it raises k8sbins to the CCM's versions)",
			len(list), strings.Join(list, "\n  "))
	}
	t.Logf("%d packages compiled by both, each from the same module version", shared)
}
