// Package dataplane is test machinery shared by the data-plane end-to-end
// test (test/e2e, `make e2e`) and the sandbox (test/sandbox,
// `make run`): everything needed to run a real data plane out of cluster,
// without root — a private user and network namespace (unshare --user
// --map-root-user --net) with addresses on its loopback, child processes
// with logs, a real MetalLB controller and one speaker per node, two GoBGP
// routers standing in for Equinix's behind the nodes' gateway, in network
// namespaces of their own inside the user namespace (gateway.go; and
// reading their tables), and the control-plane nodes' /healthz servers.
package dataplane
