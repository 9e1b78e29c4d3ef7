//go:build linux

package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const cgroupFS = "/sys/fs/cgroup"

// hierarchies lists the cgroup mounts under /sys/fs/cgroup (cgroup v1: one
// per controller, plus name=systemd and the hybrid "unified" v2 one).
func hierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if t := fields[sep+1]; (t == "cgroup" || t == "cgroup2") && strings.HasPrefix(fields[4], cgroupFS+"/") {
			hs = append(hs, fields[4])
		}
	}
	return hs, sc.Err()
}

// makeCgroup creates path (like "/kc12ab/node-1") in every hierarchy. The
// kubelet checks that its cgroupRoot exists in all of them. A new v1 cpuset
// is empty (no CPU, no memory node: nothing may join it) unless its parent
// has clone_children, so its cpus and mems are copied from the parent.
func makeCgroup(path string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		// Each level, so cpuset's copy is done on each new level.
		rel := strings.Split(strings.Trim(path, "/"), "/")
		for i := range rel {
			d := filepath.Join(append([]string{h}, rel[:i+1]...)...)
			if err := os.Mkdir(d, 0o755); err != nil {
				if os.IsExist(err) {
					continue
				}
				return fmt.Errorf("cluster: creating cgroup %s: %w", d, err)
			}
			if filepath.Base(h) == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					if err != nil {
						return fmt.Errorf("cluster: cpuset: %w", err)
					}
					if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
						return fmt.Errorf("cluster: cpuset %s: %w", d, err)
					}
				}
			}
		}
	}
	return nil
}

// joinCgroup moves pid into path in every hierarchy.
func joinCgroup(path string, pid int) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		f := filepath.Join(h, path, "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("cluster: moving %d into %s: %w", pid, f, err)
		}
	}
	return nil
}

// cgroupPids lists the processes in path and below, in every hierarchy.
func cgroupPids(path string) []int {
	hs, _ := hierarchies()
	seen := map[int]bool{}
	var pids []int
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, path), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, l := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(l); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// killCgroup SIGKILLs everything in path and below until nothing is left
// (a process may fork while we read), for up to 10 seconds, and returns
// how many processes it found.
func killCgroup(path string) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	seen := map[int]bool{}
	for {
		pids := cgroupPids(path)
		if len(pids) == 0 {
			return len(seen), nil
		}
		if time.Now().After(deadline) {
			return len(seen), fmt.Errorf("processes still in cgroup %s after 10s: %v", path, pids)
		}
		for _, pid := range pids {
			seen[pid] = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroup removes path and everything below it, deepest first, in
// every hierarchy. An emptied cgroup may take a moment to be removable.
func removeCgroup(path string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, path)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			var err error
			for range 50 {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}
