package deploy_test

import (
	"context"
	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// call writes an API call compactly: "verb resource[.group][/sub] [ns/]name"
// with ns and name optional ("-" for none), or "verb /path".
func call(s string) testenv.APICall {
	f := strings.Fields(s)
	c := testenv.APICall{Verb: f[0]}
	if strings.HasPrefix(f[1], "/") {
		c.Path = f[1]
		return c
	}
	res, sub, _ := strings.Cut(f[1], "/")
	c.Resource, c.APIGroup, _ = strings.Cut(res, ".")
	c.Subresource = sub
	if len(f) > 2 && f[2] != "-" {
		if ns, name, ok := strings.Cut(f[2], "/"); ok {
			c.Namespace, c.Name = ns, name
		} else {
			c.Namespace = f[2]
		}
	}
	if len(f) > 3 {
		c.Name = f[3]
	}
	return c
}

func calls(specs ...string) []testenv.APICall {
	out := make([]testenv.APICall, len(specs))
	for i, s := range specs {
		out[i] = call(s)
	}
	return out
}

// baseAllowed are the calls of the standard cloud-controller-manager and of
// this CCM's own loops (see the comments in base/rbac.yaml). Namespace "-"
// means cluster-wide (a list or watch across all namespaces).
var baseAllowed = calls(
	// events, in the namespace of the object they are about
	"create events default", "patch events default", "update events kube-system", "create events team-a",
	// cloud-node, cloud-node-lifecycle, bgp annotations
	"get nodes - n1", "list nodes", "watch nodes", "update nodes - n1", "patch nodes - n1", "delete nodes - n1",
	"patch nodes/status - n1",
	// service controller and eip
	"list services", "watch services", "get services team-a/web", "patch services team-a/web", "patch services/status team-a/web",
	// controlplane: default/kubernetes, the external Service and its slices
	"list services default", "watch services default",
	"patch services kube-system/cloud-provider-equinix-metal-kubernetes-external",
	// Server-side apply of an object that does not exist yet is
	// authorised as create too (found by the real cluster's test).
	"create services kube-system/cloud-provider-equinix-metal-kubernetes-external",
	"create endpointslices.discovery.k8s.io kube-system/cloud-provider-equinix-metal-kubernetes-external-abcde",
	"patch services/status kube-system/cloud-provider-equinix-metal-kubernetes-external",
	"delete services kube-system/cloud-provider-equinix-metal-kubernetes-external",
	"list endpointslices.discovery.k8s.io default", "watch endpointslices.discovery.k8s.io default",
	"patch endpointslices.discovery.k8s.io kube-system/cloud-provider-equinix-metal-kubernetes-external-abcde",
	"list endpointslices.discovery.k8s.io kube-system",
	"delete endpointslices.discovery.k8s.io kube-system/cloud-provider-equinix-metal-kubernetes-external-old",
	// lbmodule: the nodes of Local Services' ready endpoints (NoAnnouncingNode),
	// after asking whether it may (granted to every authenticated user by the server)
	"list endpointslices.discovery.k8s.io", "watch endpointslices.discovery.k8s.io",
	"create selfsubjectaccessreviews.authorization.k8s.io",
	// cluster ID
	"get namespaces - kube-system",
	// leader election
	"create leases.coordination.k8s.io kube-system",
	"get leases.coordination.k8s.io kube-system/cloud-controller-manager",
	"update leases.coordination.k8s.io kube-system/cloud-controller-manager",
	// delegated authentication and authorisation of the secure port
	"get configmaps kube-system/extension-apiserver-authentication",
	"list configmaps kube-system/extension-apiserver-authentication",
	"watch configmaps kube-system/extension-apiserver-authentication",
	"create tokenreviews.authentication.k8s.io", "create subjectaccessreviews.authorization.k8s.io",
	// discovery, granted to every authenticated user by the server
	"get /api", "get /apis", "get /version",
)

// baseDenied must stay denied: the CCM reads its Secret from a volume, never
// from the API, and has no business with other objects.
var baseDenied = calls(
	"get secrets kube-system/metal-cloud-config", "list secrets", "get secrets default/token",
	"delete namespaces - kube-system", "get namespaces - default", "list namespaces",
	"create services default", "delete services team-a/web", "delete services kube-system/kube-dns", "update services team-a/web",
	"create nodes", "get nodes/proxy - n1",
	"update leases.coordination.k8s.io kube-system/kube-controller-manager", "delete leases.coordination.k8s.io kube-system/cloud-controller-manager",
	"patch configmaps kube-system/kube-proxy", "get configmaps kube-system/coredns",
	"patch endpointslices.discovery.k8s.io default/kubernetes", "delete endpointslices.discovery.k8s.io team-a/web-abcde",
	"create pods kube-system", "create serviceaccounts/token kube-system/cloud-controller-manager",
	"patch ipaddresspools.metallb.io metallb-system/svc-pool", "get configmaps metallb-system/config",
	"create clusterrolebindings.rbac.authorization.k8s.io",
)

// rbacCase: the calls the ServiceAccount must and must not be allowed
// with the RBAC of one kustomization (and of the chart in the same mode).
type rbacCase struct {
	dir     string
	allowed []testenv.APICall
	denied  []testenv.APICall
}

func rbacCases() []rbacCase {
	metallbCRD := calls(
		"get ipaddresspools.metallb.io metallb-system/svc-pool", "list ipaddresspools.metallb.io metallb-system",
		"watch bgppeers.metallb.io metallb-system", "create bgppeers.metallb.io metallb-system",
		"patch bgpadvertisements.metallb.io metallb-system/svc-adv", "update ipaddresspools.metallb.io metallb-system/svc-pool",
		"delete bgppeers.metallb.io metallb-system/node-1-peer-0", "list bgpadvertisements.metallb.io metallb-system",
		"list secrets metallb-system", "patch secrets metallb-system/equinix-metal-bgp-password",
		"create secrets metallb-system", "delete secrets metallb-system/equinix-metal-bgp-password",
		"list bfdprofiles.metallb.io metallb-system", "patch bfdprofiles.metallb.io metallb-system/equinix-metal-bfd",
		"delete bfdprofiles.metallb.io metallb-system/equinix-metal-bfd",
	)
	metallbLegacy := calls(
		"get configmaps metallb-system/config", "patch configmaps metallb-system/config",
		"update configmaps metallb-system/config", "create configmaps metallb-system",
	)
	return []rbacCase{
		{dir: ".", allowed: baseAllowed, denied: append(slices.Clone(baseDenied), metallbCRD...)},
		{dir: "overlays/kube-vip", allowed: baseAllowed, denied: baseDenied},
		{
			dir:     "overlays/metallb",
			allowed: append(slices.Clone(baseAllowed), metallbCRD...),
			denied: append(calls(
				"create ipaddresspools.metallb.io default", "list ipaddresspools.metallb.io",
				"create l2advertisements.metallb.io metallb-system", "patch configmaps metallb-system/config",
				"get secrets metallb-system/memberlist", "watch secrets metallb-system", "patch secrets kube-system/metal-cloud-config",
			), without(baseDenied, "patch ipaddresspools.metallb.io metallb-system/svc-pool")...),
		},
		{
			dir:     "overlays/metallb-legacy",
			allowed: append(slices.Clone(baseAllowed), metallbLegacy...),
			denied: append(calls(
				"patch configmaps metallb-system/memberlist", "delete configmaps metallb-system/config",
				"get configmaps default/config", "patch ipaddresspools.metallb.io metallb-system/svc-pool",
				"get secrets metallb-system/memberlist", "create bgppeers.metallb.io metallb-system",
			), without(baseDenied, "get configmaps metallb-system/config")...),
		},
	}
}

// TestCheckAllowed installs each kustomization's RBAC in a real
// kube-apiserver and checks hand-written calls: the ones the code makes
// must be allowed, the others denied. Later kustomizations replace the
// metallb-system Role of earlier ones, as installing that overlay would.
func TestCheckAllowed(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)

	for _, tc := range rbacCases() {
		t.Run(tc.dir, func(t *testing.T) {
			objs, err := deploycheck.Render(tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := deploycheck.Install(ctx, env.Config, deploycheck.RBACObjects(objs)); err != nil {
				t.Fatal(err)
			}
			denied, err := deploycheck.CheckAllowed(ctx, kube, append(slices.Clone(tc.allowed), tc.denied...))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range denied {
				got = append(got, d.String())
			}
			var want []string
			for _, c := range tc.denied {
				want = append(want, deploycheck.Denied{Call: c}.String())
			}
			for _, g := range got {
				if !slices.Contains(want, stripReason(g)) {
					t.Errorf("denied, but the CCM needs it: %s", g)
				}
			}
			for _, w := range want {
				if !slices.ContainsFunc(got, func(g string) bool { return stripReason(g) == w }) {
					t.Errorf("allowed, but must be denied: %s", w)
				}
			}
		})
	}
}

// without returns calls minus the ones spec describes.
func without(cs []testenv.APICall, spec string) []testenv.APICall {
	drop := call(spec)
	return slices.DeleteFunc(slices.Clone(cs), func(c testenv.APICall) bool { return c == drop })
}

func stripReason(s string) string {
	before, _, _ := strings.Cut(s, " (")
	return before
}

// TestCheckAllowedFromAuditLog runs the path integration tests take: real
// requests as the CCM's ServiceAccount, read back from the audit log and
// handed to CheckAllowed, which must flag exactly the requests the server
// refused (403).
func TestCheckAllowedFromAuditLog(t *testing.T) {
	sa := testenv.ServiceAccountUser(deploy.Namespace, deploy.ServiceAccountName)
	env := testenv.New(t, testenv.Options{AuditLog: true, Users: []testenv.User{sa}})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	objs, err := deploycheck.Render(".")
	if err != nil {
		t.Fatal(err)
	}
	if err := deploycheck.Install(ctx, env.Config, deploycheck.RBACObjects(objs)); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg, err := env.UserConfig(sa.Name)
	if err != nil {
		t.Fatal(err)
	}
	ccm := kubernetes.NewForConfigOrDie(cfg)
	requests := []struct {
		name    string
		do      func() error
		allowed bool
	}{
		{"get kube-system namespace", func() error {
			_, err := ccm.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			return err
		}, true},
		{"list nodes", func() error { _, err := ccm.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err }, true},
		{"annotate node", func() error {
			_, err := ccm.CoreV1().Nodes().Patch(ctx, "n1", "application/merge-patch+json",
				[]byte(`{"metadata":{"annotations":{"metal.equinix.com/test":"1"}}}`), metav1.PatchOptions{})
			return err
		}, true},
		{"read the cloud-config Secret", func() error {
			_, err := ccm.CoreV1().Secrets(deploy.Namespace).Get(ctx, deploy.SecretName, metav1.GetOptions{})
			return err
		}, false},
		{"list ConfigMaps in kube-system", func() error {
			_, err := ccm.CoreV1().ConfigMaps(deploy.Namespace).List(ctx, metav1.ListOptions{})
			return err
		}, false},
	}
	for _, r := range requests {
		err := r.do()
		if r.allowed != (err == nil) {
			t.Fatalf("%s: err = %v, want allowed=%v", r.name, err, r.allowed)
		}
	}

	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	made := testenv.CallsBy(testenv.Calls(events), sa.Name)
	if len(made) < len(requests) {
		t.Fatalf("audit log has %d calls by %s, want at least %d: %v", len(made), sa.Name, len(requests), made)
	}
	denied, err := deploycheck.CheckAllowed(ctx, admin, made)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, c := range made {
		if c.Code == 403 {
			refused = append(refused, deploycheck.Denied{Call: c}.String())
		}
	}
	var flagged []string
	for _, d := range denied {
		flagged = append(flagged, stripReason(d.String()))
	}
	if len(refused) != 2 || !slices.Equal(flagged, refused) {
		t.Errorf("CheckAllowed flagged %v; the server refused %v (want the 2 refused requests)", flagged, refused)
	}
}
