// Package e2e is the machinery of the data-plane end-to-end test (`make
// e2e`): the CCM binary as it ships, a real kube-apiserver, the Equinix Metal
// emulator, a real MetalLB controller and one speaker per node, and two GoBGP
// routers standing in for Equinix's, all inside one private network
// namespace that an unprivileged user can create (unshare --user
// --map-root-user --net). Every address lives on that namespace's loopback,
// so nothing leaves the machine and no root is needed. The processes and
// the namespace come from test/dataplane, which the sandbox (`make
// run`) uses too; this package adds the World of one test run (not to be confused with test/cluster's real cluster), the policy
// mount and the router assertions.
//
// The scenarios are in e2e_test.go behind the build tag "e2e", so a plain
// `go test ./...` compiles this package but runs none of them; `make e2e`
// (part of `make ci`) runs them once, with the binaries the Makefile built
// into the cache named by the environment (see dataplane.Binaries).
package e2e
