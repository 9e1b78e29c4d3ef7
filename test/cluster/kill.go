//go:build linux

package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KillContainer ends every process of a pod's container with SIGKILL, as
// `kill -9` on its node would (or the kernel's OOM killer): nothing in the
// container runs a handler, and the kubelet restarts it as it would a
// crashed one. It returns how many processes it killed.
func (c *Cluster) KillContainer(ctx context.Context, ns, pod, container string) (int, error) {
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	id := ""
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container {
			_, id, _ = strings.Cut(cs.ContainerID, "://")
		}
	}
	if id == "" {
		return 0, fmt.Errorf("cluster: pod %s/%s has no running container %q", ns, pod, container)
	}
	var node *Node
	for _, n := range c.Nodes {
		if n.Name == p.Spec.NodeName {
			node = n
		}
	}
	if node == nil {
		return 0, fmt.Errorf("cluster: pod %s/%s is on %q, not one of the cluster's nodes", ns, pod, p.Spec.NodeName)
	}
	// The kubelet (cgroupfs driver) makes each container a cgroup named by
	// its ID under the pod's, under the node's cgroupRoot: its cgroup.procs
	// are the container's processes.
	var procs string
	root := filepath.Join(cgroupFS, "pids", node.cgroup)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() != id {
			return nil
		}
		procs = filepath.Join(path, "cgroup.procs")
		return filepath.SkipAll
	})
	if err != nil || procs == "" {
		return 0, fmt.Errorf("cluster: no cgroup for container %s of %s/%s under %s (%v)", id, ns, pod, root, err)
	}
	b, err := os.ReadFile(procs)
	if err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	n := 0
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("cluster: container %s of %s/%s had no process to kill (%s)", id, ns, pod, procs)
	}
	return n, nil
}
