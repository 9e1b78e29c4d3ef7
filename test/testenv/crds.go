package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
)

// MetalLBModule is the Go module whose config/crd/bases holds the MetalLB
// CRDs testenv installs; its version is the one pinned in go.mod.
const MetalLBModule = "go.universe.tf/metallb"

// metalLBCRDSubdir holds the CRDs as controller-gen writes them. They are
// installable as they are: the BGPPeer conversion webhook (v1beta1 <->
// v1beta2) is added only by MetalLB's kustomize overlay, so here BGPPeer
// serves both versions with conversion strategy None (v1beta2 is stored).
const metalLBCRDSubdir = "config/crd/bases"

var metalLBDirCache struct {
	sync.Mutex
	dir string
}

// MetalLBCRDDir returns the directory of MetalLB's CRDs in the module cache,
// for the go.universe.tf/metallb version in the go.mod of the current
// directory's module (`go list -m`), downloading the module if needed.
func MetalLBCRDDir(ctx context.Context) (string, error) {
	metalLBDirCache.Lock()
	defer metalLBDirCache.Unlock()
	if metalLBDirCache.dir != "" {
		return metalLBDirCache.dir, nil
	}
	var mod struct{ Path, Version, Dir string }
	if err := goJSON(ctx, "", &mod, "list", "-m", "-json", MetalLBModule); err != nil {
		return "", fmt.Errorf("testenv: locating the MetalLB CRDs: %w: run inside the repository (its go.mod pins %s) or set Options.MetalLBCRDDir", err, MetalLBModule)
	}
	if mod.Dir == "" { // pinned but not downloaded yet
		if err := goJSON(ctx, os.TempDir(), &mod, "mod", "download", "-json", MetalLBModule+"@"+mod.Version); err != nil {
			return "", fmt.Errorf("testenv: downloading %s@%s for its CRDs: %w", MetalLBModule, mod.Version, err)
		}
	}
	dir := filepath.Join(mod.Dir, filepath.FromSlash(metalLBCRDSubdir))
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("testenv: %s@%s has no %s: pin a MetalLB version that ships its CRDs there", MetalLBModule, mod.Version, metalLBCRDSubdir)
	}
	metalLBDirCache.dir = dir
	return dir, nil
}

// MetalLBCRDDirAt returns the directory of the CRDs of MetalLB at version
// (another release than the pinned one, for tests that run against the
// CRDs users may have installed), downloading the module through the Go
// module proxy into the module cache if needed.
func MetalLBCRDDirAt(ctx context.Context, version string) (string, error) {
	var mod struct{ Dir, Error string }
	if err := goJSON(ctx, os.TempDir(), &mod, "mod", "download", "-json", MetalLBModule+"@"+version); err != nil {
		return "", fmt.Errorf("testenv: downloading %s@%s for its CRDs: %w", MetalLBModule, version, err)
	}
	dir := filepath.Join(mod.Dir, filepath.FromSlash(metalLBCRDSubdir))
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("testenv: %s@%s has no %s", MetalLBModule, version, metalLBCRDSubdir)
	}
	return dir, nil
}

// goJSON runs the go command (in dir, or the current directory if "") and
// decodes its JSON output into v.
func goJSON(ctx context.Context, dir string, v any, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("go %s: unexpected output: %w", strings.Join(args, " "), err)
	}
	return nil
}

// readCRDs reads every CustomResourceDefinition in the given files and
// directories (*.yaml, *.yml, *.json directly inside a directory, sorted by
// name); other kinds in those files are an error, so a wrong path is noticed.
func readCRDs(paths []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("testenv: CRD path: %w", err)
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("testenv: reading CRD directory: %w", err)
		}
		var inDir []string
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					inDir = append(inDir, filepath.Join(p, e.Name()))
				}
			}
		}
		if len(inDir) == 0 {
			return nil, fmt.Errorf("testenv: CRD directory %s has no .yaml, .yml or .json file", p)
		}
		sort.Strings(inDir)
		files = append(files, inDir...)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("testenv: reading CRD file: %w", err)
		}
		got, err := decodeCRDs(data)
		if err != nil {
			return nil, fmt.Errorf("testenv: %s: %w", f, err)
		}
		crds = append(crds, got...)
	}
	return crds, nil
}

// decodeCRDs decodes a multi-document YAML (or JSON) stream of
// apiextensions.k8s.io/v1 CustomResourceDefinitions.
func decodeCRDs(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := 1; ; i++ {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return crds, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if crd.APIVersion == "" && crd.Kind == "" && crd.Name == "" {
			continue // empty document between "---" separators
		}
		if crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("document %d is %s %s, not an %s CustomResourceDefinition", i, crd.APIVersion, crd.Kind, apiextensionsv1.SchemeGroupVersion)
		}
		crds = append(crds, crd)
	}
}

// createCRDs creates the CRDs. kube-apiserver is still starting, so an
// error that is not about the CRD itself is retried.
func createCRDs(ctx context.Context, cs apiextensionsclient.Interface, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		var last error
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, last = cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
			switch {
			case last == nil || apierrors.IsAlreadyExists(last):
				return true, nil
			case apierrors.IsInvalid(last) || apierrors.IsBadRequest(last):
				return false, last
			default:
				return false, nil
			}
		})
		if err != nil {
			if last == nil {
				last = err
			}
			return fmt.Errorf("testenv: creating CRD %s: %w", crd.Name, last)
		}
	}
	return nil
}

// justEstablishedDelay is how long kube-apiserver holds the first creates
// of a custom resource after its CRD became Established (it sleeps 2 s in
// the request, in case another server of an HA pair has not seen the CRD
// yet). The server and this package compare the same condition time, which
// is stored in whole seconds; the margin covers clock reading order.
const justEstablishedDelay = 2*time.Second + 100*time.Millisecond

// waitCRDs waits until each CRD is Established, its resources are in
// discovery (so clients that map kinds through discovery, like kubectl and
// controller-runtime, work at once), and it is old enough that creating its
// objects is not delayed: tests then see the server's usual latency.
func waitCRDs(ctx context.Context, cs apiextensionsclient.Interface, disc discovery.DiscoveryInterface, crds []*apiextensionsv1.CustomResourceDefinition) error {
	var established time.Time
	for _, crd := range crds {
		err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("testenv: CRD %s names not accepted: %s", crd.Name, c.Message)
				}
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					if c.LastTransitionTime.After(established) {
						established = c.LastTransitionTime.Time
					}
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("testenv: waiting for CRD %s to be Established: %w", crd.Name, err)
		}
	}
	for gv, plurals := range wantedDiscovery(crds) {
		err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := disc.ServerResourcesForGroupVersion(gv)
			if err != nil {
				return false, nil
			}
			have := map[string]bool{}
			for _, r := range list.APIResources {
				have[r.Name] = true
			}
			for _, p := range plurals {
				if !have[p] {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("testenv: waiting for %s %v in discovery: %w", gv, plurals, err)
		}
	}
	if wait := time.Until(established.Add(justEstablishedDelay)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("testenv: waiting for the CRDs to settle: %w", ctx.Err())
		}
	}
	return nil
}

// wantedDiscovery maps each served group/version to the plurals the CRDs
// add there.
func wantedDiscovery(crds []*apiextensionsv1.CustomResourceDefinition) map[string][]string {
	out := map[string][]string{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gv := crd.Spec.Group + "/" + v.Name
				out[gv] = append(out[gv], crd.Spec.Names.Plural)
			}
		}
	}
	return out
}
