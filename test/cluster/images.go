//go:build linux

package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// busyboxApplets are linked to /bin/busybox in the test image.
var busyboxApplets = []string{"sh", "nc", "sleep", "echo", "cat", "hostname", "ip", "ls", "ps", "grep", "true", "false", "env", "seq", "wc", "mkdir", "httpd", "test", "date", "printf"}

// nodeImage is an image to import into every node's containerd under ref.
type nodeImage struct {
	ref string
	img v1.Image
}

// baseImages are the sandbox (pause) and test (busybox) images every
// cluster has.
func baseImages(pauseBin string) ([]nodeImage, error) {
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w (apt-get install -y busybox-static)", err)
	}
	var links []tarEntry
	for _, a := range busyboxApplets {
		links = append(links, tarEntry{name: "bin/" + a, link: "busybox"})
	}
	pauseImg, err := singleLayerImage([]tarEntry{{name: "pause", data: pause, mode: 0o755}}, nil, []string{"/pause"})
	if err != nil {
		return nil, err
	}
	bbImg, err := singleLayerImage(append([]tarEntry{{name: "bin/", mode: 0o755}, {name: "bin/busybox", data: busybox, mode: 0o755}, {name: "tmp/", mode: 0o1777}}, links...), nil, []string{"/bin/sh"})
	if err != nil {
		return nil, err
	}
	return []nodeImage{{pauseImage, pauseImg}, {BusyboxImage, bbImg}}, nil
}

// writeImageTars writes the images as image tarballs (docker save format,
// which `ctr images import` reads) and returns their paths.
func writeImageTars(dir string, images []nodeImage) ([]string, error) {
	var paths []string
	for i, im := range images {
		ref, err := name.ParseReference(im.ref)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		if err := tarball.WriteToFile(p, ref, im.img); err != nil {
			return nil, fmt.Errorf("cluster: writing image %s: %w", im.ref, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// hostFilesImage is an image of files from this machine (dst in the image
// -> src here) with the shared libraries they load (ldd's closure, at the
// paths ldd names), busybox's applets (those files does not give) when
// withShell, extra entries, and the entrypoint. Images of binaries built here (MetalLB, agnhost) are
// linked against this machine's libc; this keeps them runnable without a
// base image from a registry.
func hostFilesImage(files map[string]string, withShell bool, entrypoint, cmd []string, extra ...tarEntry) (v1.Image, error) {
	entries := append([]tarEntry{{name: "tmp/", mode: 0o1777}}, extra...)
	seen := map[string]bool{}
	add := func(dst, src string) error {
		dst = strings.TrimPrefix(dst, "/")
		if seen[dst] {
			return nil
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("cluster: image file: %w", err)
		}
		seen[dst] = true
		entries = append(entries, tarEntry{name: dst, data: data, mode: 0o755})
		return nil
	}
	if withShell {
		files["/bin/busybox"] = "/bin/busybox"
	}
	dsts := make([]string, 0, len(files))
	for dst := range files {
		dsts = append(dsts, dst)
	}
	sort.Strings(dsts)
	for _, dst := range dsts {
		if err := add(dst, files[dst]); err != nil {
			return nil, err
		}
		libs, err := sharedLibs(files[dst])
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			if err := add(l, l); err != nil {
				return nil, err
			}
		}
	}
	if withShell {
		// The applets files does not give (a /bin/sh of its own, say).
		for _, a := range busyboxApplets {
			if !seen["bin/"+a] {
				entries = append(entries, tarEntry{name: "bin/" + a, link: "busybox"})
			}
		}
	}
	return singleLayerImage(entries, entrypoint, cmd)
}

// sharedLibs is what ldd says bin loads ("" for a static binary).
func sharedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") || strings.Contains(string(out), "statically linked") {
			return nil, nil
		}
		return nil, fmt.Errorf("cluster: ldd %s: %v: %s", bin, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}

// layoutImage is the image for this machine's platform from an OCI layout
// (what `make image` writes).
func layoutImage(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.MediaType.IsIndex() {
			inner, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			m, err := inner.IndexManifest()
			if err != nil {
				return nil, err
			}
			for _, md := range m.Manifests {
				if md.Platform != nil && md.Platform.OS == "linux" && md.Platform.Architecture == runtime.GOARCH {
					return inner.Image(md.Digest)
				}
			}
		}
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("cluster: the OCI layout %s has no linux/%s image (make image builds one)", dir, runtime.GOARCH)
}

type tarEntry struct {
	name string
	data []byte
	link string
	mode int64
}

func singleLayerImage(entries []tarEntry, entrypoint, cmd []string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), Typeflag: tar.TypeReg}
		switch {
		case e.link != "":
			h = &tar.Header{Name: e.name, Linkname: e.link, Typeflag: tar.TypeSymlink, Mode: 0o777}
		case e.name[len(e.name)-1] == '/':
			h = &tar.Header{Name: e.name, Typeflag: tar.TypeDir, Mode: e.mode}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	// Uncompressed: these are written for every cluster and imported on
	// every node of it, and gzip (at both ends) was most of the time each
	// took. Nothing here crosses a network.
	layer := static.NewLayer(buf.Bytes(), types.DockerUncompressedLayer)
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	// ctr import unpacks only images of the machine's platform.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = entrypoint
	cf.Config.Cmd = cmd
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}
	return mutate.ConfigFile(img, cf)
}

// writeSelfSignedCA writes a CA certificate (PEM) whose key is thrown away:
// for kube-apiserver's --client-ca-file, which no client here uses.
func writeSelfSignedCA(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster-client-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
