package eip

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/fieldmanager"
)

func TestCheckRequestedIP(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		want string // "" means usable
	}{
		{"145.40.90.10", ""},
		{"::ffff:145.40.90.10", ""},
		{"not-an-ip", `spec.loadBalancerIP "not-an-ip" is not an IP address`},
		{"145.40.90.10/32", "is not an IP address"},
		{"2604:1380::1", ""}, // an IPv6 Elastic IP; its family is checkLoadBalancerIPFamily's
		{"0.0.0.0", "cannot be a Service address"},
		{"::", "cannot be a Service address"},
		{"ff02::1", "cannot be a Service address"},
		{"127.0.0.1", "cannot be a Service address"},
	} {
		t.Run(tc.ip, func(t *testing.T) {
			err := checkRequestedIP(tc.ip)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "remove") {
				t.Fatalf("got %v, want an error containing %q and the fix", err, tc.want)
			}
			// The service controller must wait, not hot-loop.
			var re *cloudapi.RetryError
			if !errors.As(err, &re) || re.RetryAfter() != invalidIPRetry {
				t.Errorf("want a RetryError of %s, got %#v", invalidIPRetry, err)
			}
		})
	}
}

func TestWrittenByCCM(t *testing.T) {
	mf := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	for _, tc := range []struct {
		name   string
		fields []metav1.ManagedFieldsEntry
		want   bool
	}{
		{"nobody", nil, false},
		{"the user", []metav1.ManagedFieldsEntry{mf("kubectl-client-side-apply", `{"f:spec":{"f:loadBalancerIP":{},"f:type":{}}}`)}, false},
		{"the CCM", []metav1.ManagedFieldsEntry{mf("kubectl", `{"f:spec":{"f:type":{}}}`), mf(fieldmanager.CCM, `{"f:spec":{"f:loadBalancerIP":{}}}`)}, true},
		{"the CCM, other fields only", []metav1.ManagedFieldsEntry{mf(fieldmanager.CCM, `{"f:metadata":{"f:finalizers":{}}}`)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{ManagedFields: tc.fields}}
			if got := writtenByCCM(svc); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
