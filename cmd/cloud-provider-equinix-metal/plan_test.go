package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/plan"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

func runSub(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{name}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeCloudConfig(t *testing.T, emu *emulator.Emulator, extra map[string]any) string {
	t.Helper()
	settings := map[string]any{"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": emu.URL()}
	for k, v := range extra {
		settings[k] = v
	}
	b, _ := json.Marshal(settings)
	path := filepath.Join(t.TempDir(), "cloud-sa.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlanCommand: the plan subcommand end to end, with the cloud-config
// from a file or from its Secret, in text and JSON, and its exit codes.
func TestPlanCommand(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	seed := emulator.DefaultSeed()
	seed.Devices = append(seed.Devices, emulator.DeviceSeed{Hostname: "node-0", Metro: "da"})
	emu := emulator.StartForTest(t, seed, emulator.Options{})
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{"metal.equinix.com/eip-metro": "da"}},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80}}},
	}
	if _, err := kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb := map[string]any{"loadbalancer": "metallb:///metallb-system?crdConfiguration=true", "moduleCacheDir": t.TempDir()}
	file := writeCloudConfig(t, emu, lb)

	code, out, errOut := runSub(t, "plan", "--kubeconfig", env.KubeconfigPath, "--cloud-config", file)
	if code != plan.ExitChanges || !strings.Contains(out, "reserve") || !strings.Contains(out, "default/web") {
		t.Fatalf("plan: exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, plan.ExitChanges, out, errOut)
	}

	// The same from the Secret the Deployment mounts, as JSON.
	b, _ := os.ReadFile(file)
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "metal-cloud-config"}, Data: map[string][]byte{"cloud-sa.json": b}}
	if _, err := kube.CoreV1().Secrets("kube-system").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runSub(t, "plan", "--kubeconfig", env.KubeconfigPath, "--cloud-config-secret", "kube-system/metal-cloud-config", "-o", "json")
	var res plan.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != plan.ExitChanges {
		t.Fatalf("plan -o json: exit %d, %v; stdout:\n%s\nstderr:\n%s", code, err, out, errOut)
	}
	if len(res.EIPs) != 1 || res.EIPs[0].Action != plan.ActionReserve || res.EIPs[0].Location != "metro da" {
		t.Errorf("JSON eips %+v, want one reserve in metro da", res.EIPs)
	}
	if strings.Contains(out, emulator.DefaultToken) || strings.Contains(errOut, emulator.DefaultToken) {
		t.Error("the API key is in the output")
	}
	if n := len(emu.ElasticReservations(emulator.DefaultProjectID)); n != 0 {
		t.Errorf("%d reservations after plan, want none", n)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad output", []string{"--kubeconfig", env.KubeconfigPath, "--cloud-config", file, "-o", "yaml"}, `-o "yaml" is not an output format; use text or json`},
		{"bad orphan mode", []string{"--kubeconfig", env.KubeconfigPath, "--cloud-config", file, "--metal-orphan-eips", "delete"}, `orphanEIPs (flag --metal-orphan-eips): "delete" is not an option`},
		{"both sources", []string{"--kubeconfig", env.KubeconfigPath, "--cloud-config", file, "--cloud-config-secret", "a/b"}, "both given"},
		{"bad secret ref", []string{"--kubeconfig", env.KubeconfigPath, "--cloud-config-secret", "nope"}, "is not namespace/name"},
	} {
		code, _, errOut := runSub(t, "plan", tc.args...)
		if code != plan.ExitError || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and one line with %q", tc.name, code, errOut, tc.want)
		}
	}
}

// TestCleanupCommand: cleanup lists one cluster's Service EIPs, releases
// nothing without --yes, and with it releases exactly those.
func TestCleanupCommand(t *testing.T) {
	emu := emulator.StartForTest(t, emulator.DefaultSeed(), emulator.Options{})
	add := func(tags ...string) string {
		r, err := emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	gone := []string{add(eip.Tags("gone-uid", "default", "a")...), add(eip.Tags("gone-uid", "prod", "b")...)}
	kept := []string{add(eip.Tags("live-uid", "default", "a")...), add("control-plane-eip"), add(eip.ServiceTag("default", "a"), eip.ClusterTag("gone-uid"))}
	file := writeCloudConfig(t, emu, nil)
	exists := func(id string) bool { _, ok := emu.Reservation(id); return ok }

	code, _, errOut := runSub(t, "cleanup", "--cloud-config", file)
	if code != plan.ExitError || !strings.Contains(errOut, "--cluster-uid is required") {
		t.Errorf("without --cluster-uid: exit %d, stderr %q", code, errOut)
	}

	emu.ResetCounts()
	code, out, errOut := runSub(t, "cleanup", "--cloud-config", file, "--cluster-uid", "gone-uid")
	if code != 0 || !strings.Contains(out, "(2)") || !strings.Contains(out, "--yes") {
		t.Fatalf("cleanup without --yes: exit %d\n%s\n%s", code, out, errOut)
	}
	for route := range emu.Counts() {
		if !strings.HasPrefix(string(route), "GET ") {
			t.Errorf("cleanup without --yes wrote: %s", route)
		}
	}
	for _, id := range append(gone, kept...) {
		if !exists(id) {
			t.Errorf("reservation %s released without --yes", id)
		}
	}

	code, out, errOut = runSub(t, "cleanup", "--cloud-config", file, "--cluster-uid", "gone-uid", "--yes")
	if code != 0 || strings.Count(out, "Released") != 2 {
		t.Fatalf("cleanup --yes: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, id := range gone {
		if exists(id) {
			t.Errorf("reservation %s of the gone cluster is still there", id)
		}
	}
	for _, id := range kept {
		if !exists(id) {
			t.Errorf("reservation %s is not the gone cluster's Service EIP, yet was released", id)
		}
	}
}
