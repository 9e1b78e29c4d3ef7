//go:build linux

package cluster

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// busyboxApplets are linked to /bin/busybox in the test image.
var busyboxApplets = []string{"sh", "nc", "sleep", "echo", "cat", "hostname", "ip", "ls", "ps", "grep", "true", "false", "env", "seq", "wc"}

// writeImages writes the sandbox (pause) and test (busybox) images as
// image tarballs (docker save format, which `ctr images import` reads) and
// returns their paths.
func writeImages(dir, pauseBin string) ([]string, error) {
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
	images := []struct {
		ref     string
		entries []tarEntry
		cmd     []string
	}{
		{pauseImage, []tarEntry{{name: "pause", data: pause, mode: 0o755}}, []string{"/pause"}},
		{BusyboxImage, append([]tarEntry{{name: "bin/", mode: 0o755}, {name: "bin/busybox", data: busybox, mode: 0o755}, {name: "tmp/", mode: 0o1777}}, links...), []string{"/bin/sh"}},
	}
	var paths []string
	for i, im := range images {
		img, err := singleLayerImage(im.entries, im.cmd)
		if err != nil {
			return nil, err
		}
		ref, err := name.ParseReference(im.ref)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		if err := tarball.WriteToFile(p, ref, img); err != nil {
			return nil, fmt.Errorf("cluster: writing image %s: %w", im.ref, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

type tarEntry struct {
	name string
	data []byte
	link string
	mode int64
}

func singleLayerImage(entries []tarEntry, cmd []string) (v1.Image, error) {
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
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
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
	cf.Config.Cmd = cmd
	cf.Config.Env = []string{"PATH=/bin"}
	return mutate.ConfigFile(img, cf)
}
