//go:build linux

package cluster

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A cluster's work directory grows to about 1.7 GiB (three containerd
// stores with the images unpacked, the image archives, etcd's WAL). Past
// that, the kubelets evict every pod once the disk has less than 1% free
// (kubeletConfig), and the pods then show as Failed with no word of the
// disk: a full disk must stop a run before it starts, saying so.
const clusterNeeds = 3 << 30

// freeSpace refuses to start a cluster in dir's filesystem when it has too
// little room left, naming what earlier runs left behind there.
func freeSpace(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil // not knowing is no reason to refuse
	}
	free := st.Bavail * uint64(st.Bsize)
	size := st.Blocks * uint64(st.Bsize)
	return diskVerdict(dir, free, size, leftovers(dir))
}

// leftover is a work directory an earlier run kept, and its size.
type leftover struct {
	dir   string
	bytes int64
}

// diskVerdict is the pure part of freeSpace.
func diskVerdict(dir string, free, size uint64, left []leftover) error {
	need := uint64(clusterNeeds) + size/100
	if free >= need {
		return nil
	}
	msg := fmt.Sprintf("cluster: %s has %s free; a cluster needs %s (its work directory, and 1%% of the disk below which its kubelets evict every pod)",
		dir, gib(int64(free)), gib(int64(need)))
	if len(left) == 0 {
		return fmt.Errorf("%s: free some space", msg)
	}
	var total int64
	for _, l := range left {
		total += l.bytes
	}
	return fmt.Errorf("%s: %d work directories of earlier runs (%s) hold %s; once their logs are read, run make cluster-clean and remove them: rm -rf %s",
		msg, len(left), strings.Join(dirsOf(left), " "), gib(total), filepath.Join(dir, "cluster-*"))
}

func dirsOf(left []leftover) []string {
	out := make([]string, len(left))
	for i, l := range left {
		out[i] = l.dir
	}
	return out
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// leftovers lists the cluster work directories in dir, with their sizes.
func leftovers(dir string) []leftover {
	dirs, _ := filepath.Glob(filepath.Join(dir, "cluster-*"))
	var out []leftover
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, leftover{dir: d, bytes: duBytes(d)})
		}
	}
	return out
}

func duBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// pruneKept removes from a failed run's work directory what is big and
// says nothing about the failure (the image archives, each node's
// containerd store and kubelet root), so that a kept directory holds its
// logs in megabytes, not 1.7 GiB: a few failed runs must not fill the disk
// under the next one. It runs after everything under dir is unmounted.
func pruneKept(dir string) (freed int64, err error) {
	var victims []string
	archives, _ := filepath.Glob(filepath.Join(dir, "image-*.tar"))
	victims = append(victims, archives...)
	for _, sub := range []string{"containerd", "kubelet"} {
		d, _ := filepath.Glob(filepath.Join(dir, "node-*", sub))
		victims = append(victims, d...)
	}
	for _, v := range victims {
		n := duBytes(v)
		if e := os.RemoveAll(v); e != nil {
			err = e
			continue
		}
		freed += n
	}
	return freed, err
}
