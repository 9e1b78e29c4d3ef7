package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// KubernetesVersion is the kube-apiserver version the tests run against. It
// must equal the k8s.io/kubernetes requirement in k8sbins/go.mod (the
// Makefile builds that version and names the cache directory after it) and
// share its minor with the k8s.io/client-go in the root go.mod, so the
// server never drifts from the client libraries the CCM is built with; a
// test checks both.
const KubernetesVersion = "v1.37.1"

// AssetsEnv names the environment variable that points at the directory
// holding kube-apiserver and etcd. The Makefile exports it.
const AssetsEnv = "METAL_CCM_K8S_ASSETS"

// Binary names looked up in the assets directory.
const (
	apiserverBinary = "kube-apiserver"
	etcdBinary      = "etcd"
)

// DefaultAssetsDir returns where `make k8s-bins` puts the binaries:
// $METAL_CCM_K8S_ASSETS if set, else $XDG_CACHE_HOME (or $HOME/.cache)
// followed by cloud-provider-equinix-metal/k8s/<KubernetesVersion>. It
// repeats the Makefile's rule on purpose (and not os.UserCacheDir, which
// differs on macOS) so a plain `go test` finds what `make` built.
func DefaultAssetsDir() (string, error) {
	return assetsDir(os.Getenv)
}

func assetsDir(getenv func(string) string) (string, error) {
	if d := getenv(AssetsEnv); d != "" {
		return d, nil
	}
	cache := getenv("XDG_CACHE_HOME")
	if cache == "" {
		home := getenv("HOME")
		if home == "" {
			return "", errors.New("testenv: neither " + AssetsEnv + ", XDG_CACHE_HOME nor HOME is set: set " + AssetsEnv + " to the directory `make k8s-bins` built into")
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "cloud-provider-equinix-metal", "k8s", KubernetesVersion), nil
}

// ErrBinaryMissing is wrapped by the error Start returns when kube-apiserver
// or etcd is not in the assets directory.
var ErrBinaryMissing = errors.New("binary missing")

// missingBinaryError tells the user how to get the binary, in one line.
type missingBinaryError struct{ name, dir string }

func (e *missingBinaryError) Error() string {
	return fmt.Sprintf("testenv: %s not found in %s: run make k8s-bins (or set %s to where it was built)", e.name, e.dir, AssetsEnv)
}

func (e *missingBinaryError) Unwrap() error { return ErrBinaryMissing }

// findBinaries returns the paths of kube-apiserver and etcd in dir.
func findBinaries(dir string) (apiserver, etcd string, err error) {
	for _, b := range []struct {
		name string
		path *string
	}{{apiserverBinary, &apiserver}, {etcdBinary, &etcd}} {
		p := filepath.Join(dir, b.name)
		fi, statErr := os.Stat(p)
		if statErr != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", "", &missingBinaryError{name: b.name, dir: dir}
		}
		*b.path = p
	}
	return apiserver, etcd, nil
}
