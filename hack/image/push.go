package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/ocimodule"
)

// runPush pushes the index of an OCI layout (make image) to a registry,
// with the credentials of ~/.docker/config.json.
func runPush(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "bin/image", "OCI layout written by image build")
	ref := fs.String("ref", "", "registry/repository:tag to push to")
	_ = fs.Parse(args)
	r, err := name.ParseReference(*ref)
	if err != nil {
		return fmt.Errorf("--ref %q: %w (want registry/repository:tag, for example make image-push REGISTRY=registry.example/team)", *ref, err)
	}
	idx, err := layout.ImageIndexFromPath(*dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w (run make image first)", *dir, err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", r.Context(), d)
	return nil
}

// runModule packages a .wasm load-balancer module as an OCI artifact:
// an OCI layout in --out, pushed to --ref when given. It prints the
// reference to put in loadbalancer, pinned by digest.
func runModule(args []string) error {
	fs := flag.NewFlagSet("module", flag.ExitOnError)
	wasmPath := fs.String("wasm", "", "the module (.wasm, built with sdk/)")
	out := fs.String("out", "", "OCI layout directory to (re)write")
	ref := fs.String("ref", "", "registry/repository:tag to push to (optional)")
	_ = fs.Parse(args)
	wasm, err := os.ReadFile(*wasmPath)
	if err != nil {
		return fmt.Errorf("--wasm: %w", err)
	}
	img, err := ocimodule.Package(wasm, time.Unix(0, 0))
	if err != nil {
		return fmt.Errorf("%s: %w", *wasmPath, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	if *out != "" {
		if err := os.RemoveAll(*out); err != nil {
			return err
		}
		p, err := layout.Write(*out, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img); err != nil {
			return err
		}
		fmt.Printf("module %s in %s: %s\n", *wasmPath, *out, d)
	}
	if *ref != "" {
		r, err := name.ParseReference(*ref)
		if err != nil {
			return fmt.Errorf("--ref %q: %w", *ref, err)
		}
		if err := remote.Write(r, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return err
		}
		fmt.Printf("loadbalancer: %s%s@%s\n", ocimodule.Scheme, r.Context(), d)
	}
	return nil
}
