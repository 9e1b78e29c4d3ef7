package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
)

// conflictingPlacement is a placement policy that cannot be evaluated for
// any Service: two complete definitions of placement give different values
// (an OPA conflict error at evaluation, not at load).
const conflictingPlacement = `package equinix.eip

placement := {"metro": "da"} if input.config
placement := {"metro": "sv"} if input.config
`

// TestClusterWidePolicyFailureIsOneEvent: when the placement policy fails
// for every Service, the CCM records one ElasticIPFailed Event for the
// cluster (on the kube-system Namespace), not one per Service and retry;
// a Service's own problem (a denial) stays on the Service.
func TestClusterWidePolicyFailureIsOneEvent(t *testing.T) {
	t.Parallel()
	dir := mountPolicies(t)
	if err := os.WriteFile(filepath.Join(dir, "eip.rego"), []byte(conflictingPlacement), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{settings: map[string]any{"policyDir": dir}})
	ctx := context.Background()
	h.addNode("worker-0", nil)
	const services = 5
	for i := range services {
		h.addService(fmt.Sprintf("web-%d", i), nil, "")
	}
	ccmEvents := func(reason string) (onServices, onCluster []string) {
		list, err := h.kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Source.Component != "cloud-provider-equinix-metal" && e.ReportingController != "cloud-provider-equinix-metal" {
				continue
			}
			switch e.InvolvedObject.Kind {
			case "Service":
				onServices = append(onServices, e.InvolvedObject.Name)
			case "Namespace":
				onCluster = append(onCluster, fmt.Sprintf("%s x%d: %s", e.InvolvedObject.Name, e.Count, e.Message))
			}
		}
		return onServices, onCluster
	}
	h.eventually("the policy failure is reported for the cluster", func() (bool, string) {
		_, onCluster := ccmEvents(eip.ReasonFailed)
		return len(onCluster) == 1, fmt.Sprintf("cluster events %q", onCluster)
	})
	// Every Service fails and is retried meanwhile (the service
	// controller's own SyncLoadBalancerFailed is its business).
	time.Sleep(5 * time.Second)
	onServices, onCluster := ccmEvents(eip.ReasonFailed)
	if len(onServices) != 0 {
		t.Errorf("%d ElasticIPFailed Events on Services (%v), want none: the failure is the policy's", len(onServices), onServices)
	}
	if len(onCluster) != 1 || !strings.HasPrefix(onCluster[0], "kube-system x1: ") || !strings.Contains(onCluster[0], "fix the policy") {
		t.Errorf("cluster events %q, want one, once, on kube-system, naming the fix", onCluster)
	}
	for i := range services {
		if ip, _ := h.serviceIP(fmt.Sprintf("web-%d", i)); ip != "" {
			t.Errorf("web-%d got %s from a policy that cannot be evaluated", i, ip)
		}
	}
}
