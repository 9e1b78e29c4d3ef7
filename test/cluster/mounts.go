//go:build linux

package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// unmountUnder unmounts every mount point at or below dir, deepest (latest)
// first: overlay roots and shm of containers, the kubelet's volume tmpfs,
// pods' netns bind mounts (under containerd's state directory).
func unmountUnder(dir string) error {
	dir = filepath.Clean(dir)
	var errs []error
	for range 5 { // a mount under a mount shows up once its parent is read
		points, err := mountPoints()
		if err != nil {
			return err
		}
		var ours []string
		for _, p := range points {
			if p == dir || strings.HasPrefix(p, dir+"/") {
				ours = append(ours, p)
			}
		}
		if len(ours) == 0 {
			return nil
		}
		slices.Reverse(ours)
		errs = nil
		for _, p := range ours {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			ps = append(ps, unescapeMount(fields[4]))
		}
	}
	return ps, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// sharedDirs are fixed paths the kubelet, containerd's shims and libcni
// create whatever their configuration says. Start notes which existed;
// Stop removes those it made once they are empty.
var sharedDirs = []string{
	"/var/lib/kubelet/device-plugins", // the kubelet's device manager socket: a constant, shared by all nodes
	"/var/lib/kubelet",
	"/var/log/containers",  // the kubelet's container log symlinks: a constant
	"/var/lib/cni/results", // libcni's cache (containerd 1.6 sets no other)
	"/var/lib/cni",
	"/run/containerd/s", // the shims' sockets: a constant of containerd 1.6
	"/run/containerd",
}

func existingDirs() map[string]bool {
	m := map[string]bool{}
	for _, d := range sharedDirs {
		if _, err := os.Stat(d); err == nil {
			m[d] = true
		}
	}
	return m
}

// removeSharedDirs removes the shared directories that did not exist
// before Start, if they are empty by now (children first: the list is in
// that order); the device manager's socket, left by a killed kubelet, goes
// first.
func removeSharedDirs(before map[string]bool) {
	for _, d := range sharedDirs {
		if before[d] {
			continue
		}
		if d == "/var/lib/kubelet/device-plugins" {
			_ = os.Remove(filepath.Join(d, "kubelet.sock"))
		}
		_ = os.Remove(d) // fails, and keeps it, unless empty
	}
}

// shimSocketDir is where containerd 1.6's shims put their sockets, named by
// a hash (of containerd's address, namespace and id) we cannot reverse.
const shimSocketDir = "/run/containerd/s"

func listDir(dir string) map[string]bool {
	m := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		m[e.Name()] = true
	}
	return m
}

// removeLeftovers removes what is left at fixed paths when the sandboxes
// were not torn down (a kubelet or containerd that died first): the
// kubelet's symlinks in /var/log/containers into our pod logs; libcni's
// cached results of our network (named after the id) and of containerd's
// loopback network for the same sandboxes; and the sockets of killed shims
// that appeared since Start (a live shim's socket accepts a connection and
// is kept).
func removeLeftovers(dir, id string, shimSocketsBefore, resultsBefore map[string]bool) {
	if links, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, l := range links {
			p := filepath.Join("/var/log/containers", l.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
				_ = os.Remove(p)
			}
		}
	}
	const results = "/var/lib/cni/results"
	if entries, err := os.ReadDir(results); err == nil {
		// <network>-<sandbox id>-eth0, the network being <id>-node-N.
		sandboxes := map[string]bool{}
		for _, r := range entries {
			if n := r.Name(); strings.HasPrefix(n, id+"-") {
				if parts := strings.Split(n, "-"); len(parts) >= 2 {
					sandboxes[parts[len(parts)-2]] = true
				}
				_ = os.Remove(filepath.Join(results, n))
			}
		}
		for sb := range sandboxes {
			_ = os.Remove(filepath.Join(results, "cni-loopback-"+sb+"-lo"))
		}
		// A sandbox torn down half-way (its eth0 result deleted, its
		// loopback's not) leaves one without a partner: any loopback
		// result new since Start is ours (one cluster per machine).
		for _, r := range entries {
			if n := r.Name(); strings.HasPrefix(n, "cni-loopback-") && !resultsBefore[n] {
				_ = os.Remove(filepath.Join(results, n))
			}
		}
	}
	for name := range listDir(shimSocketDir) {
		if shimSocketsBefore[name] {
			continue
		}
		p := filepath.Join(shimSocketDir, name)
		if conn, err := net.DialTimeout("unix", p, time.Second); err == nil {
			conn.Close()
			continue
		}
		_ = os.Remove(p)
	}
}
