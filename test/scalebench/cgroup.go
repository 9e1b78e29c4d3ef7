package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memCgroup holds the CCM to a real memory limit, as a container's: the
// kernel charges the process's anonymous memory and the page cache it
// touches (the binary's own pages among them), reclaims the page cache
// first, and OOM-kills the process when that is not enough. GOMEMLIMIT
// alone only tells the Go runtime where to collect harder; this is what
// decides whether a pod survives.
type memCgroup struct {
	dir string
	v2  bool
}

// newMemCgroup makes a memory cgroup with the limit (root only; cgroup v1
// or v2 with the memory controller), or says why there is none.
func newMemCgroup(limit int64) (*memCgroup, error) {
	name := fmt.Sprintf("scalebench-%d", os.Getpid())
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		c := &memCgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		if err := os.Mkdir(c.dir, 0o755); err != nil {
			return nil, err
		}
		if err := c.write("memory.max", strconv.FormatInt(limit, 10)); err != nil {
			c.remove()
			return nil, fmt.Errorf("%w (is the memory controller enabled in /sys/fs/cgroup/cgroup.subtree_control?)", err)
		}
		_ = c.write("memory.swap.max", "0")
		return c, nil
	}
	c := &memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.write("memory.limit_in_bytes", strconv.FormatInt(limit, 10)); err != nil {
		c.remove()
		return nil, err
	}
	// No swap beyond the limit (where swap accounting exists), and the
	// pages touched before the move are charged here too.
	_ = c.write("memory.memsw.limit_in_bytes", strconv.FormatInt(limit, 10))
	_ = c.write("memory.move_charge_at_immigrate", "3")
	return c, nil
}

func (c *memCgroup) write(file, value string) error {
	return os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0o644)
}

// add moves a process in (right after its start: the little it touched
// before moves with it).
func (c *memCgroup) add(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

// peak is the highest charge, page cache included, in bytes.
func (c *memCgroup) peak() (int64, error) {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// oomKills counts the processes the kernel killed for the limit.
func (c *memCgroup) oomKills() (int, error) {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strconv.Atoi(strings.TrimSpace(rest))
		}
	}
	return 0, errors.New("no oom_kill count in " + file)
}

// remove deletes the cgroup once its processes are gone.
func (c *memCgroup) remove() { _ = os.Remove(c.dir) }
