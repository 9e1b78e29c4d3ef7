// Command image builds and publishes this repository's release artifacts
// without Docker or a daemon, with go-containerregistry:
//
//	image build  --out DIR --version V --revision R --source URL --created UNIX --binary os/arch=path... [--module-cache os/arch=dir]
//	image compile-modules --out DIR
//	image push   --layout DIR --ref registry/repo:tag
//	image stamp  --from deploy --out bin/deploy --version V --image registry/repo
//	image module --wasm mine.wasm --out DIR [--ref registry/repo:tag]
//	image keygen --key cosign.key
//	image sign   --layout DIR --key cosign.key --ref registry/repo
//	image verify --layout DIR --key cosign.pub [--ref registry/repo]
//
// The Makefile drives it (make image, image-push, image-sign,
// image-verify, manifests, module-image); it is development tooling, not
// linked into the CCM.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|push|stamp|module|compile-modules|keygen|sign|verify [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(os.Args[2:])
	case "push":
		err = runPush(os.Args[2:])
	case "stamp":
		err = runStamp(os.Args[2:])
	case "module":
		err = runModule(os.Args[2:])
	case "keygen":
		err = runKeygen(os.Args[2:])
	case "sign":
		err = runSign(os.Args[2:])
	case "verify":
		err = runVerify(os.Args[2:])
	case "compile-modules":
		fs := flag.NewFlagSet("compile-modules", flag.ExitOnError)
		out := fs.String("out", "", "directory to (re)write with the built-ins' compilation cache for "+NativePlatform)
		_ = fs.Parse(os.Args[2:])
		if *out == "" {
			err = fmt.Errorf("--out is required")
		} else {
			err = CompileModules(*out)
		}
	default:
		err = fmt.Errorf("unknown command %q: want build, push, stamp, module, compile-modules, keygen, sign or verify", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "image %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

type binaries []Binary

func (b *binaries) String() string { return fmt.Sprint(*b) }
func (b *binaries) Set(s string) error {
	bin, err := ParseBinary(s)
	if err == nil {
		*b = append(*b, bin)
	}
	return err
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	var bins binaries
	out := fs.String("out", "bin/image", "OCI layout directory to (re)write")
	var m Meta
	fs.StringVar(&m.Version, "version", "", "version (hack/version.sh)")
	fs.StringVar(&m.Revision, "revision", "", "git commit")
	fs.StringVar(&m.Source, "source", "", "source repository URL")
	created := fs.String("created", "0", "creation time, Unix seconds (SOURCE_DATE_EPOCH)")
	fs.Var(&bins, "binary", "os/arch=path of a static binary (repeat per platform)")
	caches := map[string]string{}
	fs.Func("module-cache", "os/arch=dir of compile-modules for that platform's image", func(s string) error {
		plat, dir, ok := strings.Cut(s, "=")
		if !ok || dir == "" {
			return fmt.Errorf("want os/arch=dir, for example %s=bin/module-cache", NativePlatform)
		}
		caches[plat] = dir
		return nil
	})
	_ = fs.Parse(args)
	for i, b := range bins {
		bins[i].ModuleCache = caches[b.Platform.OS+"/"+b.Platform.Architecture]
	}
	if m.Version == "" || m.Revision == "" {
		return fmt.Errorf("--version and --revision are required")
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("--created %q: want Unix seconds: %w", *created, err)
	}
	m.Created = time.Unix(secs, 0).UTC()
	idx, err := BuildIndex(bins, m)
	if err != nil {
		return err
	}
	var sboms []SBOM
	for _, b := range bins {
		s, err := MakeSBOM(b, m)
		if err != nil {
			return err
		}
		sboms = append(sboms, s)
	}
	kept, err := WriteLayout(*out, m.Version, idx, sboms)
	if err != nil {
		return err
	}
	for _, tag := range kept {
		fmt.Printf("kept the signature %s: the same digest as the image-sign before\n", tag)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image %s (%d platforms, SBOM attached) in %s: %s\n", m.Version, len(bins), *out, d)
	return nil
}

func runStamp(args []string) error {
	fs := flag.NewFlagSet("stamp", flag.ExitOnError)
	from := fs.String("from", "deploy", "manifests with the placeholders")
	out := fs.String("out", "bin/deploy", "where the stamped copy goes")
	version := fs.String("version", "", "version to stamp")
	image := fs.String("image", PlaceholderImage, "image repository to stamp")
	_ = fs.Parse(args)
	if err := Stamp(*from, *out, *version, *image); err != nil {
		return err
	}
	fmt.Printf("manifests and chart for %s:%s in %s\n", *image, *version, *out)
	return nil
}

func runKeygen(args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ExitOnError)
	key := fs.String("key", "cosign.key", "where to write the private key (the public key goes beside it, .pub)")
	_ = fs.Parse(args)
	pub, err := Keygen(*key)
	if err != nil {
		return err
	}
	fmt.Printf("ECDSA P-256 key pair: %s (private: keep it out of the repository) and %s\n", *key, pub)
	return nil
}

func runSign(args []string) error {
	fs := flag.NewFlagSet("sign", flag.ExitOnError)
	dir := fs.String("layout", "bin/image", "OCI layout written by image build")
	key := fs.String("key", "", "PEM ECDSA P-256 private key ($COSIGN_PASSWORD for an encrypted one)")
	ref := fs.String("ref", "", "registry/repository the image is pushed to (the signature names it)")
	_ = fs.Parse(args)
	if *key == "" || *ref == "" {
		return fmt.Errorf("--key and --ref are required")
	}
	sv, err := LoadSigner(*key)
	if err != nil {
		return err
	}
	signed, err := Sign(*dir, *ref, sv)
	if err != nil {
		return err
	}
	for _, s := range signed {
		fmt.Printf("signed the %s %s@%s: %s in %s\n", s.What, *ref, s.Digest, s.Tag, *dir)
	}
	return nil
}

func runVerify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	dir := fs.String("layout", "bin/image", "OCI layout written by image build and signed by image sign")
	key := fs.String("key", "", "PEM public key")
	ref := fs.String("ref", "", "registry/repository the signature must name (empty: any)")
	_ = fs.Parse(args)
	if *key == "" {
		return fmt.Errorf("--key is required")
	}
	v, err := LoadVerifier(*key)
	if err != nil {
		return err
	}
	res, err := Verify(*dir, *ref, v)
	if err != nil {
		return fmt.Errorf("%s: %w", *dir, err)
	}
	fmt.Printf("%s: %d blobs match their digests; the image index %s (%s) is signed by %s", *dir, res.Blobs, res.Index, res.Tag, *key)
	if res.SBOM != nil {
		fmt.Printf(", and its SBOM %s too", *res.SBOM)
	}
	fmt.Println()
	return nil
}
