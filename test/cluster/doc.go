// Package cluster runs real Kubernetes nodes on this machine for tests:
// kube-apiserver + etcd from test/testenv, and per node a network
// namespace with its own containerd and kubelet, joined by a router
// namespace. Machinery: product code never imports it.
//
// The layout (one cluster per machine at a time; the addresses are fixed):
//
//	host netns      kube-apiserver on 0.0.0.0:<port>, veth <id>h 10.200.0.1/30
//	  │             routes 10.201.0.0/24, 10.202.0.0/16 via 10.200.0.2
//	router netns    uplink 10.200.0.2/30, bridge br0 10.201.0.1/24, forwarding on,
//	  │             route 10.202.N.0/24 via 10.201.0.(9+2N) per node
//	node N netns    eth0 10.201.0.(9+2N)/24 on br0, default via 10.201.0.1;
//	                containerd + kubelet; pods on 10.202.N.0/24 (CNI ptp + host-local)
//
// The host only gains a veth and two routes: forwarding is on in the router
// and node namespaces only, so the host's own sysctls stay as they were.
//
// Traps met on a Firecracker VM (root, cgroup v1, no CAP_SYS_RESOURCE):
//
//   - Processes are started with `nsenter --net=...`, never `ip netns exec`:
//     the latter remounts /sys for the namespace, and runc then finds no
//     cgroup mount under /sys/fs/cgroup.
//
//   - Without CAP_SYS_RESOURCE even root cannot lower an OOM score, and the
//     kubelet asks for -998 for each sandbox: runc fails with "can't get
//     final child's PID from pipe: EOF" and no pod ever starts. containerd
//     gets restrict_oom_score_adj = true and the kubelet oomScoreAdj: 0.
//
//   - kubelet 1.37 refuses cgroup v1 unless failCgroupV1: false.
//
//   - The kubelet writes a few things to fixed paths whatever its flags say:
//     /var/lib/kubelet/pki unless --cert-dir is given (then every node would
//     share node-1's serving certificate: it is given),
//     /var/lib/kubelet/device-plugins/kubelet.sock (a constant: the nodes
//     share it, harmless without device plugins) and /var/log/containers;
//     containerd 1.6 puts its shims' sockets in /run/containerd/s and libcni
//     its cache in /var/lib/cni. Stop removes those it created.
//
// The kubelets authenticate with the admin token, and accept anyone who
// reaches them (anonymous, AlwaysAllow): phase 1 has no node authorizer nor
// TLS bootstrap. kube-apiserver listens on 0.0.0.0 so that the nodes reach
// it at 10.200.0.1; they check its certificate as "localhost".
//
// Options.KubeProxy adds kube-proxy (iptables mode) per node and
// kube-controller-manager (EndpointSlices, no cloud controllers) on the
// host; Options.Scheduler adds kube-scheduler (and that
// kube-controller-manager, whose node lifecycle controller takes the
// not-ready taint kube-apiserver puts on new Nodes off again). Without the
// scheduler, pods need spec.nodeName (which ignores that taint).
//
// Stop deletes the pods first, so containerd tears the sandboxes down the
// normal way (CNI DEL, shims exit), then kills what is left in the
// cluster's cgroups (containerd runs in one of them, so its shims and
// containers do too), unmounts what is under the work directory, and
// removes the cgroups, the network namespaces and the directory.
//
// Options.Cloud makes it an Equinix Metal cluster (cloud.go, bgp.go): the
// emulator on the host's address with a device per node, kubelets with
// --cloud-provider=external, the CCM's image imported into every node and
// the project's Helm chart installed, MetalLB's own manifest (CRDs and
// webhooks left out), two BIRD routers on the bridge at the peer addresses, reached
// through the gateway netns as on Equinix Metal (bgp.go),
// and a client netns behind them (Cluster.Dial, ClientHTTP, UDPExchange).
// kube-proxy runs in a restart loop: it exits when the CCM adds addresses
// to its Node, for its DaemonSet to start it again.
//
// A cloud cluster's emulator also holds the control-plane Elastic IP (tag
// ControlPlaneEIPTag, the chart's config.eipTag). Equinix's network routes
// an Elastic IP assigned to a device to that device; fabric.go does it on
// the routers (a static route per assignment, synced from the emulator).
// kube-apiserver runs on the host, so node-1 forwards its own address and
// port there: the CCM's health checks find a control-plane node answering,
// as one whose kube-apiserver runs on it would.
//
// CloudOptions.FRR runs MetalLB's speakers in FRR mode, the mode that
// announces IPv6: each node gets a bgpd of Debian's FRR in its netns, and
// this process is MetalLB's reloader (test/dataplane's FRR); the speaker
// DaemonSet of metallb-native.yaml gets METALLB_BGP_TYPE=frr, its node's
// files at /etc/frr_reloader (a hostPath, subPathExpr on the node name)
// and hostPID, to signal the reloader. CloudOptions.DualStack (which needs
// FRR) adds IPv6 everywhere: the nodes' public IPv6 on their links (the
// bridge is a /64 of the project's /56, so each node's address is the
// emulator's device address), pods from fd00:202:0:N::/64, Services from
// fd00:10::/108, kube-proxy for both families, and IPv6 sessions at the
// routers (bgp.go).
//
// Options.CoreDNS adds cluster DNS: CoreDNS (built here with the plugins a
// cluster needs, test/testenv/corednsbin) as kube-dns at DNSServiceIP, and
// the kubelets' clusterDNS and clusterDomain.
//
// Nothing is pulled: the sandbox image is a static pause binary (built by
// `make cluster-bins` from the k8s.io/kubernetes module) and the test image a
// static busybox (Debian's busybox-static), both written as image tarballs
// with go-containerregistry and imported into each node's containerd.
package cluster
