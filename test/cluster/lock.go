package cluster

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// lockPath serialises clusters on one machine: their addresses are fixed,
// so two at once would collide. The kernel drops a flock with its holder,
// so a run killed with -9 (or a session ended under it) frees the lock
// while its namespaces, routes and cgroups stay behind.
const lockPath = "/run/metal-ccm-cluster.lock"

// lockWait is how long Start waits for another cluster to finish.
const lockWait = 30 * time.Minute

//go:embed clean.sh
var cleanScript string

// machineLock takes the lock, waiting up to lockWait for a running
// cluster. With the lock held, a route to the node network can only be a
// killed run's leftover, and it is removed (clean.sh, as make
// cluster-clean does) rather than failing every later run on the machine.
func machineLock(logf func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: lock %s: %w", lockPath, err)
	}
	deadline := time.Now().Add(lockWait)
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("cluster: lock %s: %w", lockPath, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("cluster: another cluster has held %s for %s; one runs per machine (its addresses are fixed)", lockPath, lockWait)
		}
		if !said {
			logf("cluster: another cluster is running on this machine; waiting up to %s for it", lockWait)
			said = true
		}
		time.Sleep(2 * time.Second)
	}
	if routeExists() {
		logf("cluster: a killed run left a route to %s behind; removing its leftovers", nodeNet)
		out, err := exec.Command("sh", "-c", cleanScript).CombinedOutput()
		logf("cluster: %s", strings.TrimSpace(string(out)))
		if err != nil || routeExists() {
			f.Close()
			return nil, fmt.Errorf("cluster: a route to %s remains after removing a killed run's leftovers (%v); see ip netns; ip route", nodeNet, err)
		}
	}
	return f, nil
}

func routeExists() bool {
	out, _ := exec.Command("ip", "route", "show", nodeNet).Output()
	return len(strings.TrimSpace(string(out))) > 0
}
