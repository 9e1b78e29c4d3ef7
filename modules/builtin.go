// Package modules embeds the built-in load-balancer modules: Wasm files that
// `make modules` builds from the folders next to this file.
//
// A fresh clone builds and vets without them (the embed pattern matches the
// folder, which holds a README); asking for a module that was not built is a
// run-time error that says to run `make modules`.
package modules

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
)

// Names of the built-in modules, one folder each.
const (
	MetalLBCRD       = "metallb-crd"
	MetalLBConfigMap = "metallb-configmap"
	KubeVIP          = "kube-vip"
	Empty            = "empty"
)

// Names lists every built-in module.
var Names = []string{MetalLBCRD, MetalLBConfigMap, KubeVIP, Empty}

//go:embed wasm
var files embed.FS

// Builtin returns the Wasm bytes of a built-in module.
func Builtin(name string) ([]byte, error) {
	b, err := files.ReadFile("wasm/" + name + ".wasm")
	if errors.Is(err, fs.ErrNotExist) {
		known := false
		for _, n := range Names {
			known = known || n == name
		}
		if !known {
			return nil, fmt.Errorf("there is no built-in load-balancer module %q; the built-ins are %v", name, Names)
		}
		return nil, fmt.Errorf("the built-in load-balancer module %q is not in this binary; run make modules, then rebuild the CCM", name)
	}
	return b, err
}
