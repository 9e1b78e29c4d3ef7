//go:build linux

package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// acquiredLease is what client-go's leader election logs (at every
// verbosity) once this process leads. A CCM that loses the lease exits, so
// a live process whose log has it is the leader.
var acquiredLease = []byte("Successfully acquired lease")

// replicas runs the CCM binary as a Deployment of n replicas would: the
// same flags and cloud-config, leader election on, each restarted (with a
// new log) after it is killed, as kubelet restarts a container.
type replicas struct {
	bin, dir    string
	args        []string
	mu          sync.Mutex
	procs       []*dataplane.Proc
	generations []int
	// What supervise saw: exits for a lost lease, and crashes.
	leaseLosses int
	crashes     []string
}

// shortLeases make a killed leader replaced in seconds (the defaults would
// make each leader kill a 15 s pause).
var shortLeases = []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}

// startReplicas starts n replicas; leaseArgs are the leader election's
// timings (none: the CCM's defaults, as the chart runs it).
func startReplicas(n int, bin, dir, metalURL, kubeconfig string, leaseArgs []string) (*replicas, error) {
	cc := map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": metalURL,
		"loadbalancer": "metallb:///metallb-system", "metro": "da",
		"moduleCacheDir": filepath.Join(dir, "module-cache"),
	}
	b, _ := json.MarshalIndent(cc, "", "  ")
	path := filepath.Join(dir, "cloud-sa.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--cloud-config=" + path, "--leader-elect=true"}, leaseArgs...)
	r := &replicas{bin: bin, dir: dir, procs: make([]*dataplane.Proc, n), generations: make([]int, n),
		args: append(args, "--secure-port=0", "--authentication-skip-lookup", "--v=2")}
	for i := range n {
		if err := r.start(i); err != nil {
			r.stop()
			return nil, err
		}
	}
	return r, nil
}

func (r *replicas) start(i int) error {
	r.generations[i]++
	name := fmt.Sprintf("ccm-%d.%d", i, r.generations[i])
	p, err := dataplane.Start(r.dir, name, r.bin, r.args, []string{"METAL_API_KEY="})
	if err != nil {
		return err
	}
	r.procs[i] = p
	return nil
}

// leader is the index of the live replica that holds the lease, or -1.
func (r *replicas) leader() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.procs {
		if exited, _ := p.Exited(); exited {
			continue
		}
		if b, err := os.ReadFile(p.Log); err == nil && bytes.Contains(b, acquiredLease) {
			return i
		}
	}
	return -1
}

// waitLeader waits up to timeout for a leader.
func (r *replicas) waitLeader(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		if i := r.leader(); i >= 0 {
			return i, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no CCM replica acquired the lease within %v; see the logs in %s", timeout, r.dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kill sends SIGKILL to replica i and starts it again after restartAfter
// (holding the lock, so that supervise does not restart it first).
func (r *replicas) kill(i int, restartAfter time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[i].Kill()
	time.Sleep(restartAfter)
	return r.start(i)
}

// leaseLost is what a CCM logs when it exits because it lost the lease
// (its renewal missed the deadline on a loaded machine): a Deployment
// restarts it, and so does supervise.
var leaseLost = []byte("leaderelection lost")

// supervise restarts replicas that exited by themselves. An exit for a
// lost lease is the CCM's designed behaviour and only counted; any other
// exit is a crash, which the run reports as a problem.
func (r *replicas) supervise(stop <-chan struct{}) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		for i, p := range r.procs {
			exited, err := p.Exited()
			if !exited {
				continue
			}
			if b, _ := os.ReadFile(p.Log); bytes.Contains(b, leaseLost) {
				r.leaseLosses++
			} else {
				r.crashes = append(r.crashes, fmt.Sprintf("CCM replica %s exited (%v); its log: %s", p.Name, err, p.Log))
			}
			if err := r.start(i); err != nil {
				r.crashes = append(r.crashes, "restarting a replica: "+err.Error())
			}
		}
		r.mu.Unlock()
	}
}

// exits reads what supervise saw.
func (r *replicas) exits() (leaseLosses int, crashes []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leaseLosses, append([]string(nil), r.crashes...)
}

func (r *replicas) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		p.Stop()
	}
}
