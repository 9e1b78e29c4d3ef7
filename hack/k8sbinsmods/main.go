// Command k8sbinsmods moves the dependencies of test/testenv/k8sbins (the
// module that builds kube-apiserver, etcd, kubelet and the rest for the
// tests) to the versions the CCM's own go.mod selects. When the two build
// lists agree on every module both use, and both build with CGO_ENABLED=0
// and -trimpath (mk/tools.mk, build-k8s), the packages they share (about
// 1,300 besides the standard library: client-go, apiserver, grpc, otel and
// the rest) are one entry in
// Go's build cache, compiled once, by kube-apiserver's build, instead of a
// second time by make test. TestK8sbinsSharesTheCCMsPackages (test/testenv)
// fails when the two drift apart and names this command.
//
//	go run ./hack/k8sbinsmods          # print what would change
//	go run ./hack/k8sbinsmods -write   # and run `go get` in test/testenv/k8sbins
//
// It only ever raises a version in k8sbins. Where k8sbins needs a module
// newer than the CCM's, it says so and leaves the choice to a person:
// raising it in the CCM's go.mod changes the product.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

const binsDir = "test/testenv/k8sbins"

func main() {
	write := flag.Bool("write", false, "run the go get in "+binsDir+" (default: only print it)")
	flag.Parse()
	if err := run(*write); err != nil {
		fmt.Fprintln(os.Stderr, "k8sbinsmods:", err)
		os.Exit(1)
	}
}

func run(write bool) error {
	if _, err := os.Stat(binsDir + "/go.mod"); err != nil {
		return fmt.Errorf("run it from the repository's root (no %s/go.mod here)", binsDir)
	}
	ccm, err := buildList(".")
	if err != nil {
		return err
	}
	bins, err := buildList(binsDir)
	if err != nil {
		return err
	}
	up, behind := plan(ccm, bins)
	for _, b := range behind {
		fmt.Println("k8sbins selects a newer version than the CCM (left as it is; it costs a second compile only where both compile it, which TestK8sbinsSharesTheCCMsPackages checks):", b)
	}
	if len(up) == 0 {
		fmt.Println("k8sbins already selects the CCM's version of every module both use")
		return nil
	}
	args := append([]string{"get"}, up...)
	fmt.Println("cd", binsDir, "&& go", strings.Join(args, " "))
	if !write {
		fmt.Println("(run again with -write to apply it)")
		return nil
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = binsDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go get in %s: %w", binsDir, err)
	}
	return nil
}

// buildList returns the version `go list -m all` selects for every module of
// the module in dir, the main module left out.
func buildList(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{if not .Main}}{{.Path}} {{.Version}}{{end}}", "all")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m all in %s: %v: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	list := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, version, ok := strings.Cut(sc.Text(), " "); ok {
			list[path] = version
		}
	}
	return list, sc.Err()
}

// plan compares two build lists on the modules both have: up names each one
// k8sbins must raise to the CCM's version (path@version, for go get),
// behind each one where k8sbins already selects a newer version than the
// CCM. Kubernetes' staging modules, which k8s.io/kubernetes requires at
// v0.0.0 and k8sbins replaces, are raised like the rest: -trimpath records
// a package's module version, so v0.0.0 => v0.37.1 and v0.37.1 compile
// apart.
func plan(ccm, bins map[string]string) (up, behind []string) {
	for path, want := range ccm {
		have, ok := bins[path]
		if !ok || have == want {
			continue
		}
		switch c := semver.Compare(want, have); {
		case c > 0:
			up = append(up, path+"@"+want)
		case c < 0:
			behind = append(behind, fmt.Sprintf("%s: the CCM has %s, k8sbins %s", path, want, have))
		}
	}
	sort.Strings(up)
	sort.Strings(behind)
	return up, behind
}
