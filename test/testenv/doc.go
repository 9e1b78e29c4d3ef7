// Package testenv starts a real Kubernetes API server (kube-apiserver and
// etcd) on loopback, so integration tests, benchmarks and the `make run`
// sandbox talk to the same server code, validation and RBAC as a cluster
// does, instead of a fake clientset that accepts anything.
//
// # Binaries
//
// kube-apiserver and etcd are not downloaded (nothing but the Go module proxy
// is reachable where this project is built): `make k8s-bins` compiles them
// from the nested module in test/testenv/k8sbins, at KubernetesVersion, into
//
//	$XDG_CACHE_HOME (or ~/.cache)/cloud-provider-equinix-metal/k8s/<KubernetesVersion>
//
// once (about 4 minutes on 2 cores); later runs find them there. `make test`
// does this first and exports the directory as METAL_CCM_K8S_ASSETS; a plain
// `go test` computes the same directory. A test that needs the server and
// does not find the binaries fails with "run make k8s-bins": it never skips,
// so a missing build cannot pass as a green run.
//
// # What Start brings up
//
//   - etcd (--unsafe-no-fsync: the data is thrown away) and kube-apiserver
//     on free loopback ports, with their logs and all state in one work
//     directory. A port taken by someone else between choosing it and
//     binding it is retried with new ports, so parallel `go test` of several
//     packages is safe.
//   - Authentication by bearer token (an admin in system:masters, plus the
//     users in Options.Users), authorization by RBAC, a self-signed serving
//     certificate and a service-account signing key, as a cluster has them.
//   - MetalLB's CustomResourceDefinitions, read from config/crd/bases of the
//     go.universe.tf/metallb module pinned in go.mod (found with `go list -m`),
//     Established and visible in discovery before Start returns, plus the
//     metallb-system namespace, so every object a load-balancer module
//     generates is checked by MetalLB's real schema (OpenAPI, defaults, CEL
//     rules). BGPPeer serves v1beta1 and v1beta2 without MetalLB's conversion
//     webhook (conversion None; v1beta2 is stored): write v1beta2. Start also
//     waits out the 2 s kube-apiserver holds the first creates of a freshly
//     Established CRD, so tests and benchmarks see normal latencies.
//   - The namespaces kube-system, kube-public, kube-node-lease and default and
//     the default/kubernetes Service, which kube-apiserver creates itself;
//     Start waits for them.
//
// No kube-controller-manager runs: nothing creates EndpointSlices for
// Services, default ServiceAccounts or kube-root-ca.crt, nothing
// garbage-collects, deleted namespaces stay Terminating, and the aggregated
// ClusterRoles admin, edit and view have no rules. Service ClusterIPs (in
// 10.0.0.0/24) and NodePorts are allocated. The default/kubernetes endpoint
// is 192.0.2.1 (a documentation address; 1.37 refuses a loopback one):
// clients use Env.Config.Host.
//
// # Options
//
//   - Users: extra token-authenticated users (name and groups); Env.UserConfig
//     returns a rest.Config that acts as one of them, so a test can run the
//     CCM under the RBAC rules from deploy/ instead of as an admin.
//     ServiceAccountUser(namespace, name) is the user that RBAC subjects of
//     kind ServiceAccount match.
//   - AuditLog: turns on kube-apiserver's audit log at level Metadata;
//     Env.AuditEvents reads it back and Calls lists who called what (user,
//     verb, resource, namespace), to compare with the RBAC rules.
//   - CRDPaths: more CRD files or directories to install besides MetalLB's.
//   - APIServerFlags: more kube-apiserver flags (feature gates, say).
//   - Dir, KeepDir, AssetsDir, MetalLBCRDDir, Timeout, Logf: where state goes,
//     whether it is kept, where the binaries and CRDs are, how long start-up
//     may take, where progress is logged.
//
// Start takes about 2-3.5 s on 2 cores (BenchmarkStart), Stop a fraction of
// a second.
//
// # Use
//
// In a test, New starts an Env and stops it when the test ends:
//
//	env := testenv.New(t)
//	cs := kubernetes.NewForConfigOrDie(env.Config)
//
// Start is the same without testing.TB (the sandbox uses it); the caller
// calls Env.Stop. A package whose tests share one server can call Start in
// TestMain. Each Env is independent: tests may run several at once.
package testenv
