package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// The release name upstream's chart README installs under; its objects are
// named after it.
const upstreamRelease = deploy.ReleaseName

// upstreamChart stands in for upstream's chart (kubernetes-sigs/
// cloud-provider-equinix-metal v3.8.1, deploy/chart): the kinds and names it
// renders for its default values, written here (its templates are not
// copied): a DaemonSet, a Secret with cloud-sa.json from .Values.config, a
// ServiceAccount, the ClusterRole named by clusterRole.name, and its
// binding, all named after the release.
func upstreamChart() *chartv2.Chart {
	const objects = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
type: Opaque
data:
  cloud-sa.json: {{ .Values.config | toJson | b64enc | quote }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Values.clusterRole.name | quote }}
rules:
- apiGroups: [""]
  resources: [nodes, services]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .Release.Name }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .Values.clusterRole.name | quote }}
subjects:
- kind: ServiceAccount
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: cloud-provider-equinix-metal}
  template:
    metadata:
      labels: {app.kubernetes.io/name: cloud-provider-equinix-metal}
    spec:
      hostNetwork: true
      serviceAccountName: {{ .Release.Name }}
      containers:
      - name: cloud-provider-equinix-metal
        image: "{{ .Values.image.repository }}:v3.8.1"
        args: [--cloud-config=/etc/cloud-sa/cloud-sa.json, --leader-elect=true]
`
	return &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: "v2", Name: "cloud-provider-equinix-metal", Version: "3.8.1", AppVersion: "v3.8.1"},
		Templates: []*common.File{{Name: "templates/objects.yaml", Data: []byte(objects)}},
	}
}

// helmFor is Helm's action configuration for the test apiserver, as the
// helm command builds it from a kubeconfig and --namespace, with the
// release records in Secrets (Helm's default driver).
func helmFor(t *testing.T, env *testenv.Env) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = ptr.To(env.KubeconfigPath), ptr.To(deploy.Namespace)
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(io.Discard, nil))
	if err := cfg.Init(flags, deploy.Namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMigrateWithHelm follows docs/migrating-from-upstream.md's Helm path
// on a cluster upstream v3.8.1 served (the fixture) and whose CCM objects a
// Helm release of upstream's chart installed: the values read back from
// the release, the DaemonSet deleted first, helm upgrade of the same
// release to this chart with those values. The CCM then runs with the
// cloud-sa.json and RBAC the upgrade wrote, and takes over without moving
// an address; helm rollback to the first revision brings upstream's objects
// back.
func TestMigrateWithHelm(t *testing.T) {
	t.Parallel()
	fx, env, emu := loadUpstream(t, "testdata/upstream-v3.8.1/crd", nil)
	ctx := context.Background()
	hc := helmFor(t, env)

	// Upstream, installed with Helm from a values file that uses only
	// upstream's names, pointed at the emulator's project.
	var values map[string]any
	b, err := os.ReadFile("../../deploy/testdata/upstream-v3.8.1-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	cfgValues := values["config"].(map[string]any)
	cfgValues["apiKey"], cfgValues["projectID"], cfgValues["base-url"] = emulator.DefaultToken, fx.Project().ID, emu.URL()
	install := action.NewInstall(hc)
	install.ReleaseName, install.Namespace, install.WaitStrategy = upstreamRelease, deploy.Namespace, kube.HookOnlyStrategy
	if _, err := install.RunWithContext(ctx, upstreamChart(), values); err != nil {
		t.Fatalf("helm install of upstream's chart: %v", err)
	}
	to := newTakeover(t, fx, env, emu)

	// The guide: helm get values, delete the DaemonSet, helm upgrade.
	got, err := action.NewGetValues(hc).Run(upstreamRelease)
	if err != nil {
		t.Fatalf("helm get values: %v", err)
	}
	kube0 := kubernetes.NewForConfigOrDie(env.Config)
	if err := kube0.AppsV1().DaemonSets(deploy.Namespace).Delete(ctx, upstreamRelease, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("kubectl delete daemonset: %v", err)
	}
	ours, err := deploycheck.LoadChart("../../deploy/" + deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	upgrade := action.NewUpgrade(hc)
	upgrade.Namespace, upgrade.WaitStrategy = deploy.Namespace, kube.HookOnlyStrategy
	if _, err := upgrade.RunWithContext(ctx, upstreamRelease, ours, got); err != nil {
		t.Fatalf("helm upgrade to this chart with upstream's values: %v", err)
	}

	// What the upgrade left: this CCM's Deployment under upstream's
	// release, its Secret from the same config, upstream's Secret and
	// DaemonSet gone, the ClusterRole keeping upstream's name.
	d, err := kube0.AppsV1().Deployments(deploy.Namespace).Get(ctx, upstreamRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Deployment after helm upgrade: %v", err)
	}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != deploy.ServiceAccountName {
		t.Errorf("the Deployment runs as %q, want %q", sa, deploy.ServiceAccountName)
	}
	if _, err := kube0.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, upstreamRelease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("upstream's DaemonSet after the upgrade: %v, want it gone", err)
	}
	if _, err := kube0.CoreV1().Secrets(deploy.Namespace).Get(ctx, upstreamRelease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("upstream's Secret %s after the upgrade: %v, want it replaced by %s", upstreamRelease, err, deploy.SecretName)
	}
	secret, err := kube0.CoreV1().Secrets(deploy.Namespace).Get(ctx, deploy.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CCM's Secret after helm upgrade: %v", err)
	}
	var settings map[string]any
	if err := json.Unmarshal(secret.Data[deploy.SecretKey], &settings); err != nil {
		t.Fatalf("%s in %s: %v", deploy.SecretKey, deploy.SecretName, err)
	}
	if settings["loadbalancer"] != "metallb:///metallb-system" || settings["metro"] != "da" {
		t.Errorf("cloud-sa.json after the upgrade = %v, want upstream's values", settings)
	}
	cr, err := kube0.RbacV1().ClusterRoles().Get(ctx, "system:cloud-controller-manager", metav1.GetOptions{})
	if err != nil || cr.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Fatalf("the ClusterRole upstream's values name: %v (labels %v)", err, cr.GetLabels())
	}

	// The CCM as the Deployment runs it: the cloud-sa.json the upgrade
	// wrote. It takes over without touching an address, and every call
	// it makes is one the RBAC the upgrade installed allows.
	to.harness = newHarness(t, harnessOptions{env: env, emu: emu, settings: settings})
	to.eventually("upstream's pools adopted", func() (bool, string) {
		pools, adv, owned := to.crdState()
		for name := range to.before {
			if !owned["default."+name] {
				return false, fmt.Sprintf("pool default.%s not owned yet; pools %v", name, pools)
			}
		}
		return len(unadvertised(pools, adv)) == 0, fmt.Sprint(unadvertised(pools, adv))
	})
	to.checkKept()
	if res, rel := to.requests(); res != 0 || rel != 0 {
		t.Fatalf("after helm upgrade: %d reservations requested, %d released; want 0 and 0", res, rel)
	}
	to.checkInstalledRBAC()
	to.Stop()

	// Rollback, as the guide says: the Deployment scaled to zero first,
	// then helm rollback to upstream's revision.
	if _, err := kube0.AppsV1().Deployments(deploy.Namespace).UpdateScale(ctx, upstreamRelease, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: deploy.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("kubectl scale --replicas=0: %v", err)
	}
	rollback := action.NewRollback(hc)
	rollback.Version, rollback.WaitStrategy = 1, kube.HookOnlyStrategy
	if err := rollback.Run(upstreamRelease); err != nil {
		t.Fatalf("helm rollback to upstream's revision: %v", err)
	}
	if _, err := kube0.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, upstreamRelease, metav1.GetOptions{}); err != nil {
		t.Errorf("upstream's DaemonSet after helm rollback: %v", err)
	}
	if _, err := kube0.AppsV1().Deployments(deploy.Namespace).Get(ctx, upstreamRelease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("this CCM's Deployment after helm rollback: %v, want it gone", err)
	}
	if s, err := kube0.CoreV1().Secrets(deploy.Namespace).Get(ctx, upstreamRelease, metav1.GetOptions{}); err != nil || len(s.Data["cloud-sa.json"]) == 0 {
		t.Errorf("upstream's Secret after helm rollback: %v", err)
	}
	to.checkKept()
}
