//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// containerdConfig keeps everything of one node's containerd under its
// directory: a second containerd on the machine must share nothing with it
// (root, state, socket, runc's root, the pods' netns mounts).
const containerdConfig = `version = 2
root = "{{dir}}/containerd/root"
state = "{{dir}}/containerd/state"
[grpc]
  address = "{{sock}}"
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{{dir}}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  # Nothing is pulled: this image is imported at start (see images.go).
  sandbox_image = "{{pause}}"
  # No CAP_SYS_RESOURCE here: a negative oom_score_adj (the kubelet asks
  # -998 for sandboxes) makes runc fail with "can't get final child's PID
  # from pipe: EOF". Restricted, containerd never goes below its own score.
  restrict_oom_score_adj = true
  # Pod netns bind mounts under the state directory, not /run/netns.
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  # Streaming (exec, logs -f) is proxied by the kubelet in the same netns.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{dir}}/cni"
`

// cniConfig: a veth per pod to the node's netns (ptp) with addresses from
// the node's own pod range (one per family); the router knows which node
// has which range.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "{{net}}",
  "plugins": [
    {"type": "ptp", "ipMasq": false, "mtu": 1500,
     "ipam": {"type": "host-local", "ranges": {{ranges}},
              "routes": {{routes}}, "dataDir": "{{dir}}/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// kubeletConfig: everything per node (cgroup root, logs, plugin dirs) and
// the settings this machine needs.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{ip}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://{{sock}}
# kube-apiserver calls the kubelet (logs, exec) without a client
# certificate: phase 1 trusts anyone who reaches the node's address.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
# cgroup v1 on this machine: 1.37 refuses it unless told, and cgroupfs
# since there is no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {{cgroup}}
# No CAP_SYS_RESOURCE: the kubelet's own -999 fails, and containerd
# restricts the pods' scores (see containerd's config).
oomScoreAdj: 0
podLogsDir: {{dir}}/pod-logs
volumePluginDir: {{dir}}/volume-plugins
failSwapOn: false
# A shared test disk is not this node's to guard: no evictions, no image GC
# of the imported images.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 30
resolvConf: /etc/resolv.conf
serializeImagePulls: false
{{dns}}`

func fill(tmpl string, kv ...string) string {
	for i := 0; i+1 < len(kv); i += 2 {
		tmpl = strings.ReplaceAll(tmpl, "{{"+kv[i]+"}}", kv[i+1])
	}
	return tmpl
}

// startNode starts containerd, imports the images, and starts the kubelet
// in the node's cgroups, which its caller made.
func (c *Cluster) startNode(ctx context.Context, n *Node, kubeconfig, kubelet string, images []string, dns bool, extraFlags []string) error {
	n.Socket = filepath.Join(n.Dir, "containerd.sock")
	ranges, routes := `[[{"subnet": "`+n.PodCIDR+`"}]]`, `[{"dst": "0.0.0.0/0"}]`
	if n.PodCIDR6 != "" {
		ranges = `[[{"subnet": "` + n.PodCIDR + `"}], [{"subnet": "` + n.PodCIDR6 + `"}]]`
		routes = `[{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]`
	}
	kv := []string{"dir", n.Dir, "sock", n.Socket, "pause", pauseImage, "net", c.id + "-" + n.Name,
		"ranges", ranges, "routes", routes, "ip", n.IP, "cgroup", n.cgroup, "dns", ""}
	if dns {
		kv[len(kv)-1] = kubeletDNS
	}
	for _, d := range []string{"cni", "cni-ipam", "pod-logs", "volume-plugins", "kubelet", "containerd"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	files := map[string]string{
		"containerd.toml":         fill(containerdConfig, kv...),
		"cni/10-cluster.conflist": fill(cniConfig, kv...),
		"kubelet.yaml":            fill(kubeletConfig, kv...),
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, f), []byte(data), 0o644); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	var err error
	n.containerd, err = startAs(n.Name, n.Name+" containerd", n.NetNS, n.runtimeCG, "containerd",
		filepath.Join(n.Dir, "containerd.log"), []string{"--config", filepath.Join(n.Dir, "containerd.toml")})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if n.containerd.exited() {
			return false, n.containerd.earlyExit()
		}
		return exec.CommandContext(ctx, "ctr", "-a", n.Socket, "version").Run() == nil, nil
	})
	if err != nil {
		return fmt.Errorf("cluster: %s containerd not answering: %w", n.Name, err)
	}
	for _, im := range images {
		// k8s.io is the namespace containerd's CRI plugin (the kubelet's
		// view) uses.
		if err := run("ctr", "-a", n.Socket, "-n", "k8s.io", "images", "import", im); err != nil {
			return err
		}
	}

	n.kubelet, err = startInNS(n.Name+" kubelet", n.NetNS, n.runtimeCG, kubelet,
		filepath.Join(n.Dir, "kubelet.log"), append([]string{
			"--config=" + filepath.Join(n.Dir, "kubelet.yaml"),
			"--kubeconfig=" + kubeconfig,
			"--root-dir=" + filepath.Join(n.Dir, "kubelet"),
			// Not under --root-dir by default but /var/lib/kubelet/pki:
			// the nodes would share one serving certificate.
			"--cert-dir=" + filepath.Join(n.Dir, "kubelet", "pki"),
			"--hostname-override=" + n.Name,
			"--node-ip=" + n.IP,
			"--v=2",
		}, extraFlags...))
	return err
}

// TagImage gives the image imported as from the name to as well, on every
// node: what a manifest names (bin/deploy's stamped image) is then there
// without a pull.
func (c *Cluster) TagImage(from, to string) error {
	for _, n := range c.Nodes {
		if err := run("ctr", "-a", n.Socket, "-n", "k8s.io", "images", "tag", "--force", from, to); err != nil {
			return err
		}
	}
	return nil
}
