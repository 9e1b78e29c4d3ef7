package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/guide"
)

// upstreamChartDir is upstream's chart as published at v3.8.1 (a copy of
// the shared fixture; testdata/upstream-v3.8.1/README.md).
const upstreamChartDir = "testdata/upstream-v3.8.1/chart/cloud-provider-equinix-metal"

// upstreamRelease is the test's name of upstream's release: not the
// chart's name, so upstream's chart names its objects <release>-<chart>
// (its fullname) and the guide must find them from the release.
const upstreamRelease = "metal-ccm"

// TestMigrateWithHelm runs docs/migrating-from-upstream.md's Helm path,
// its shell block command by command (test/guide), on a cluster upstream
// v3.8.1 served (the fixture) and whose CCM objects a Helm release of
// upstream's own chart installed, under a release name other than the
// chart's. The release's values are those of a user of upstream's chart:
// the image pinned to v3.8.1 and a config key upstream's chart comments
// suggest and this CCM does not read. The guide's sequence must stop at
// the dry run, naming that key, with upstream's DaemonSet still running;
// after the fix the guide tells the person to make, the rest of the
// sequence upgrades the release to this chart with this CCM's image. The
// CCM then runs with the cloud-sa.json and RBAC the upgrade wrote and takes
// over without moving an address; the guide's rollback brings upstream's
// objects back.
func TestMigrateWithHelm(t *testing.T) {
	t.Parallel()
	fx, env, emu := loadUpstream(t, "testdata/upstream-v3.8.1/crd", nil)
	ctx := context.Background()
	kube0 := kubernetes.NewForConfigOrDie(env.Config)

	// Upstream, installed with its chart from a values file that uses only
	// upstream's names, pointed at the emulator's project, its image tag
	// pinned as its users do (the chart's default tag is "main").
	var values map[string]any
	b, err := os.ReadFile("../../deploy/testdata/upstream-v3.8.1-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	values["image"].(map[string]any)["tag"] = "v3.8.1"
	cfgValues := values["config"].(map[string]any)
	cfgValues["apiKey"], cfgValues["projectID"], cfgValues["base-url"] = emulator.DefaultToken, fx.Project().ID, emu.URL()
	cfgValues["annotationPeerASNs"] = "metal.equinix.com/peer-asn" // upstream's chart comments name it; this CCM reads annotationPeerASN
	upstreamChart, err := deploycheck.LoadChart(upstreamChartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(guide.HelmIn(t, env.KubeconfigPath, deploy.Namespace))
	install.ReleaseName, install.Namespace, install.WaitStrategy = upstreamRelease, deploy.Namespace, kube.HookOnlyStrategy
	// As Helm 3 installed it for upstream's users: client-side, which
	// drops the DaemonSet's spec.strategy (no field of a DaemonSet) with a
	// warning, where server-side apply refuses it.
	install.ServerSideApply = false
	if _, err := install.RunWithContext(ctx, upstreamChart, values); err != nil {
		t.Fatalf("helm install of upstream's chart: %v", err)
	}
	// Upstream's chart names its objects <release>-<chart>.
	upstreamName := upstreamRelease + "-cloud-provider-equinix-metal"
	if _, err := kube0.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, upstreamName, metav1.GetOptions{}); err != nil {
		t.Fatalf("upstream's DaemonSet: %v", err)
	}
	to := newTakeover(t, fx, env, emu)

	ours, err := deploycheck.LoadChart("../../deploy/" + deploy.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	sh := &guide.Shell{T: t, Ctx: ctx, Kubeconfig: env.KubeconfigPath, Kube: kube0, Chart: ours,
		Answers: map[string]string{"RELEASE": upstreamRelease, "NS": deploy.Namespace},
		Vars:    map[string]string{}, Files: map[string][]byte{}}
	cmds := guide.Commands(t, guide.MigrationGuide, guide.HelmSwitch)

	// First run: the values carry a key this chart's schema refuses. The
	// sequence stops there and upstream keeps running.
	failed, err := sh.RunAll(cmds, 0)
	if err == nil || !strings.Contains(err.Error(), "annotationPeerASNs") {
		t.Fatalf("the guide's sequence with a config key this chart refuses: %v; want it to stop naming annotationPeerASNs", err)
	}
	if _, err := kube0.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, upstreamName, metav1.GetOptions{}); err != nil {
		t.Fatalf("upstream's DaemonSet after the guide's sequence failed (%v): %v; want it still running", cmds[failed], err)
	}
	if st, err := action.NewStatus(guide.HelmIn(t, env.KubeconfigPath, deploy.Namespace)).Run(upstreamRelease); err != nil || st.(*releasev1.Release).Version != 1 {
		t.Fatalf("the release after the failed sequence: %v, %v; want upstream's revision 1 as it was", st, err)
	}

	// What the guide's filter of the values avoids: this chart refuses
	// upstream's image, naming the value and the fix.
	raw, err := action.NewGetValues(guide.HelmIn(t, env.KubeconfigPath, deploy.Namespace)).Run(upstreamRelease)
	if err != nil {
		t.Fatal(err)
	}
	delete(raw["config"].(map[string]any), "annotationPeerASNs")
	dry := action.NewUpgrade(guide.HelmIn(t, env.KubeconfigPath, deploy.Namespace))
	dry.Namespace, dry.WaitStrategy, dry.DryRunStrategy = deploy.Namespace, kube.HookOnlyStrategy, action.DryRunServer
	if _, err := dry.RunWithContext(ctx, upstreamRelease, ours, raw); err == nil || !strings.Contains(err.Error(), "image.tag v3.8.1") || !strings.Contains(err.Error(), "remove image") {
		t.Errorf("helm upgrade --dry-run=server with upstream's values as helm get values prints them: %v; want the image refused", err)
	}

	// The fix the guide tells the person to make ("Typos are refused"):
	// the key out of upstream-values.yaml, then the sequence again from
	// the command that failed.
	var kept []string
	for _, line := range strings.Split(string(sh.Files["upstream-values.yaml"]), "\n") {
		if !strings.Contains(line, "annotationPeerASNs:") {
			kept = append(kept, line)
		}
	}
	sh.Files["upstream-values.yaml"] = []byte(strings.Join(kept, "\n"))
	if _, err := sh.RunAll(cmds, failed); err != nil {
		t.Fatal(err)
	}

	// What the upgrade left: this CCM's Deployment with this CCM's image
	// under upstream's release, its Secret from the same config,
	// upstream's Secret and DaemonSet gone, the ClusterRole keeping
	// upstream's name.
	d, err := kube0.AppsV1().Deployments(deploy.Namespace).Get(ctx, "cloud-provider-equinix-metal", metav1.GetOptions{}) // the chart names it, whatever the release
	if err != nil {
		t.Fatalf("the Deployment after helm upgrade: %v", err)
	}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != deploy.ServiceAccountName {
		t.Errorf("the Deployment runs as %q, want %q", sa, deploy.ServiceAccountName)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/metal-ccm/cloud-provider-equinix-metal:v0.0.0-dev" {
		t.Errorf("the Deployment runs %s, want the chart's image", img)
	}
	if _, err := kube0.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, upstreamName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("upstream's DaemonSet after the upgrade: %v, want it gone", err)
	}
	if _, err := kube0.CoreV1().Secrets(deploy.Namespace).Get(ctx, upstreamName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("upstream's Secret %s after the upgrade: %v, want it replaced by %s", upstreamName, err, deploy.SecretName)
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

	// Rollback, the guide's commands: the Deployment scaled to zero first,
	// then helm rollback to upstream's revision (the first).
	sh.Answers["<revision>"] = "1"
	if _, err := sh.RunAll(guide.Commands(t, guide.MigrationGuide, guide.Rollback), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := kube0.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, upstreamName, metav1.GetOptions{}); err != nil {
		t.Errorf("upstream's DaemonSet after helm rollback: %v", err)
	}
	if _, err := kube0.AppsV1().Deployments(deploy.Namespace).Get(ctx, d.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("this CCM's Deployment after helm rollback: %v, want it gone", err)
	}
	if s, err := kube0.CoreV1().Secrets(deploy.Namespace).Get(ctx, upstreamName, metav1.GetOptions{}); err != nil || len(s.Data["cloud-sa.json"]) == 0 {
		t.Errorf("upstream's Secret after helm rollback: %v", err)
	}
	to.checkKept()
}
