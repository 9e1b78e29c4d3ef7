package deploy_test

import (
	"context"
	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/policies"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// wantKustomizations pins the set of installable directories, so adding or
// removing one is a conscious change covered by the tests below.
var wantKustomizations = []string{".", "overlays/custom-module", "overlays/kube-vip", "overlays/metallb", "overlays/metallb-legacy"}

// allowedNamespaces says where a namespaced object may land: kube-system,
// except the Roles (and their bindings) that grant rights in the namespace
// of the objects they cover.
func allowedNamespace(o *unstructured.Unstructured) bool {
	switch o.GetNamespace() {
	case deploy.Namespace:
		return true
	case "default", "metallb-system":
		return o.GetKind() == "Role" || o.GetKind() == "RoleBinding"
	}
	return false
}

func renderAll(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	if got := deploycheck.Kustomizations(); !slices.Equal(got, wantKustomizations) {
		t.Fatalf("Kustomizations() = %v, want %v", got, wantKustomizations)
	}
	out := map[string][]*unstructured.Unstructured{}
	for _, dir := range deploycheck.Kustomizations() {
		objs, err := deploycheck.Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		out[dir] = objs
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	return nil
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	u := find(objs, "Deployment", deploy.Namespace, "cloud-provider-equinix-metal")
	if u == nil {
		t.Fatal("no Deployment kube-system/cloud-provider-equinix-metal")
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func envOf(d *appsv1.Deployment) map[string]string {
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

// TestRender checks what each kustomization renders, without a server: the
// pieces the CCM relies on (flags, mounts, tolerations, Secret) and the
// load balancer each overlay selects.
func TestRender(t *testing.T) {
	rendered := renderAll(t)
	tests := []struct {
		dir    string
		lb     string // METAL_LOAD_BALANCER; "" = unset (cloud-sa.json decides)
		extras []string
	}{
		{dir: ".", lb: ""},
		{dir: "overlays/kube-vip", lb: "kube-vip://"},
		{dir: "overlays/metallb", lb: "metallb:///metallb-system", extras: []string{"Role metallb-system/cloud-provider-equinix-metal"}},
		{dir: "overlays/metallb-legacy", lb: "metallb:///metallb-system/config", extras: []string{"Role metallb-system/cloud-provider-equinix-metal"}},
		{dir: "overlays/custom-module", lb: "wasm:///etc/ccm/modules/mine.wasm"},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			objs := rendered[tc.dir]
			for _, o := range objs {
				if o.GetNamespace() != "" && !allowedNamespace(o) {
					t.Errorf("%s %s is in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
			for _, e := range tc.extras {
				kind, rest, _ := strings.Cut(e, " ")
				ns, name, _ := strings.Cut(rest, "/")
				if find(objs, kind, ns, name) == nil {
					t.Errorf("missing %s", e)
				}
			}
			if find(objs, "ServiceAccount", deploy.Namespace, deploy.ServiceAccountName) == nil {
				t.Error("missing the ServiceAccount")
			}

			d := deployment(t, objs)
			pod := d.Spec.Template.Spec
			if pod.ServiceAccountName != deploy.ServiceAccountName || !pod.HostNetwork || pod.DNSPolicy != "Default" {
				t.Errorf("pod: serviceAccount %q hostNetwork %v dnsPolicy %q", pod.ServiceAccountName, pod.HostNetwork, pod.DNSPolicy)
			}
			if *d.Spec.Replicas < 2 {
				t.Errorf("replicas = %d; leader election makes 2 safe, and a second one survives a node loss", *d.Spec.Replicas)
			}
			var tolerated []string
			for _, tol := range pod.Tolerations {
				tolerated = append(tolerated, tol.Key)
			}
			for _, k := range []string{"node.cloudprovider.kubernetes.io/uninitialized", "node-role.kubernetes.io/control-plane", "node.kubernetes.io/not-ready"} {
				if !slices.Contains(tolerated, k) {
					t.Errorf("does not tolerate %s", k)
				}
			}
			c := pod.Containers[0]
			for _, arg := range []string{"--cloud-config=/etc/cloud-sa/cloud-sa.json", "--leader-elect=true", "--leader-elect-resource-name=cloud-controller-manager", "--metal-policy-dir=" + deploy.PolicyDir} {
				if !slices.Contains(c.Args, arg) {
					t.Errorf("args lack %s: %v", arg, c.Args)
				}
			}
			if strings.HasPrefix(c.Image, "cloud-provider-equinix-metal") {
				t.Errorf("image %q was not rewritten by the images transformer", c.Image)
			}
			if got := envOf(d)["METAL_LOAD_BALANCER"]; got != tc.lb {
				t.Errorf("METAL_LOAD_BALANCER = %q, want %q", got, tc.lb)
			}
			volumes := map[string]string{}
			for _, v := range pod.Volumes {
				switch {
				case v.Secret != nil:
					volumes[v.Name] = "secret " + v.Secret.SecretName
				case v.ConfigMap != nil:
					volumes[v.Name] = "configmap " + v.ConfigMap.Name
				}
			}
			if volumes["cloud-config"] != "secret "+deploy.SecretName || volumes["policies"] != "configmap "+deploy.PoliciesConfigMap {
				t.Errorf("volumes = %v", volumes)
			}
			if cm := find(objs, "ConfigMap", deploy.Namespace, deploy.PoliciesConfigMap); cm == nil {
				t.Errorf("the Deployment mounts ConfigMap %s, which is not rendered", deploy.PoliciesConfigMap)
			}
		})
	}
}

// TestPoliciesConfigMapMatchesPolicies: the ConfigMap holds a copy of the
// default policies (kustomize reads nothing outside the kustomization), so
// it must equal policies/ without the _test.rego files, byte for byte.
func TestPoliciesConfigMapMatchesPolicies(t *testing.T) {
	want := map[string]string{}
	err := fs.WalkDir(policies.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(policies.FS, p)
		want[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("policies.FS has no policies")
	}
	objs, err := deploycheck.Render(".")
	if err != nil {
		t.Fatal(err)
	}
	cm := find(objs, "ConfigMap", deploy.Namespace, deploy.PoliciesConfigMap)
	if cm == nil {
		t.Fatalf("no ConfigMap %s", deploy.PoliciesConfigMap)
	}
	got, _, err := unstructured.NestedStringMap(cm.Object, "data")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var differ []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if g, ok := got[k]; !ok || g != want[k] {
			differ = append(differ, k)
		}
	}
	if len(differ) > 0 {
		t.Errorf("ConfigMap %s differs from policies/ in %v: run make sync-policies", deploy.PoliciesConfigMap, differ)
	}
}

// TestSecretTemplate: the template has the name, namespace and key the
// Deployment mounts, and the two fields cloud-sa.json needs.
func TestSecretTemplate(t *testing.T) {
	s, err := deploycheck.SecretTemplateObject()
	if err != nil {
		t.Fatal(err)
	}
	if s.GetKind() != "Secret" || s.GetNamespace() != deploy.Namespace || s.GetName() != deploy.SecretName {
		t.Fatalf("template is %s %s/%s", s.GetKind(), s.GetNamespace(), s.GetName())
	}
	file, _, _ := unstructured.NestedString(s.Object, "stringData", deploy.SecretKey)
	for _, field := range []string{`"apiKey"`, `"projectID"`} {
		if !strings.Contains(file, field) {
			t.Errorf("%s lacks %s", deploy.SecretKey, field)
		}
	}
}

// TestServerSideDryRun sends every rendered object, and the Secret
// template, to a real kube-apiserver as a dry-run create: schema, field
// validation (strict: an unknown or misspelt field fails), defaulting and
// admission all run, and nothing is stored.
func TestServerSideDryRun(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	secret, err := deploycheck.SecretTemplateObject()
	if err != nil {
		t.Fatal(err)
	}
	for dir, objs := range renderAll(t) {
		t.Run(dir, func(t *testing.T) {
			got, err := deploycheck.DryRun(ctx, env.Config, append(objs, secret))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(objs)+1 {
				t.Fatalf("server answered %d objects for %d", len(got), len(objs)+1)
			}
			for _, o := range got {
				if o.GetNamespace() != "" && !allowedNamespace(o) {
					t.Errorf("%s %s landed in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
		})
	}
	// The check has teeth: a misspelt field or a bad value is refused.
	t.Run("a broken manifest fails", func(t *testing.T) {
		objs, err := deploycheck.Render(".")
		if err != nil {
			t.Fatal(err)
		}
		d := find(objs, "Deployment", deploy.Namespace, "cloud-provider-equinix-metal").DeepCopy()
		if err := unstructured.SetNestedField(d.Object, true, "spec", "template", "spec", "hostNetwrok"); err != nil {
			t.Fatal(err)
		}
		sa := find(objs, "ServiceAccount", deploy.Namespace, deploy.ServiceAccountName).DeepCopy()
		sa.SetName("Not_A_DNS_Name")
		_, err = deploycheck.DryRun(ctx, env.Config, []*unstructured.Unstructured{d, sa})
		if err == nil || !strings.Contains(err.Error(), "hostNetwrok") || !strings.Contains(err.Error(), "Not_A_DNS_Name") {
			t.Errorf("DryRun of two broken objects: %v; want both named", err)
		}
	})
	// Dry run stored nothing.
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.AppsV1().Deployments(deploy.Namespace).Get(ctx, "cloud-provider-equinix-metal", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after dry run, getting the Deployment: %v, want NotFound", err)
	}
}
