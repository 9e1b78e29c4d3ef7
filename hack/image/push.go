package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/ocimodule"
)

// runPush pushes the image index of an OCI layout (make image) to a
// registry, with the credentials of ~/.docker/config.json, and what the
// layout has beside it: the SBOM (by digest; its subject makes the
// registry list it as a referrer of the index) and the signatures (make
// image-sign; cosign's tags sha256-<hex>.sig).
func runPush(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "bin/image", "OCI layout written by image build")
	ref := fs.String("ref", "", "registry/repository:tag to push to")
	_ = fs.Parse(args)
	r, err := name.ParseReference(*ref)
	if err != nil {
		return fmt.Errorf("--ref %q: %w (want registry/repository:tag, for example make image-push REGISTRY=registry.example/team)", *ref, err)
	}
	l, err := ReadLayout(*dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", *dir, err)
	}
	idx, err := l.ImageIndex()
	if err != nil {
		return fmt.Errorf("reading %s: %w (run make image first)", *dir, err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	if err := remote.WriteIndex(r, idx, auth); err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", r.Context(), l.Index.Digest)
	pushImage := func(d v1.Hash, to name.Reference, what string) error {
		img, err := l.Path.Image(d)
		if err != nil {
			return err
		}
		if err := remote.Write(to, img, auth); err != nil {
			return fmt.Errorf("pushing the %s: %w", what, err)
		}
		fmt.Printf("pushed the %s %s\n", what, to)
		return nil
	}
	sbom, hasSBOM := l.SBOM()
	if hasSBOM {
		if err := pushImage(sbom.Digest, r.Context().Digest(sbom.Digest.String()), "SBOM"); err != nil {
			return err
		}
	}
	signed := 0
	for _, d := range []v1.Descriptor{l.Index, sbom} {
		if d.Digest.Hex == "" {
			continue
		}
		if sig, ok := l.find(SignatureTag(d.Digest)); ok {
			if err := pushImage(sig.Digest, r.Context().Tag(SignatureTag(d.Digest)), "signature"); err != nil {
				return err
			}
			signed++
		}
	}
	if signed == 0 {
		fmt.Println("not signed (make image-sign KEY=... signs the layout before the push)")
	}
	return nil
}

// runModule packages a .wasm load-balancer module as an OCI artifact:
// an OCI layout in --out, pushed to --ref when given. It prints the
// loadbalancer URL, pinned by the manifest digest, with the ?namespace= its
// objects go to (--namespace, or a placeholder), and says which of the
// two sha256 numbers (manifest, .wasm file) goes where.
func runModule(args []string) error {
	fs := flag.NewFlagSet("module", flag.ExitOnError)
	wasmPath := fs.String("wasm", "", "the module (.wasm, built with sdk/)")
	out := fs.String("out", "", "OCI layout directory to (re)write")
	ref := fs.String("ref", "", "registry/repository:tag to push to (optional)")
	namespace := fs.String("namespace", "", "the namespace of the module's objects, for ?namespace= (optional)")
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
		fmt.Printf("module %s in %s\n", *wasmPath, *out)
	}
	fileSum := sha256.Sum256(wasm)
	fmt.Printf("manifest digest %s: the one the wasm+oci:// URL takes, after @\n", d)
	fmt.Printf("file sha256     %x: sha256sum of the .wasm, only for a mounted file (wasm:///…?sha256=)\n", fileSum)
	if *ref != "" {
		r, err := name.ParseReference(*ref)
		if err != nil {
			return fmt.Errorf("--ref %q: %w", *ref, err)
		}
		if err := remote.Write(r, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return err
		}
		ns := *namespace
		if ns == "" {
			ns = "<namespace>"
			fmt.Println("<namespace>: where the module writes its objects (loadBalancer.module.namespace); MODULE_NAMESPACE=<ns> fills it in")
		}
		fmt.Printf("loadbalancer: %s%s@%s?namespace=%s\n", ocimodule.Scheme, r.Context(), d, ns)
	}
	return nil
}
