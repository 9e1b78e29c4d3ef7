package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// lbFinalizer is the service controller's finalizer: once it is gone, the
// service controller has done all it will ever do for the Service.
const lbFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// TestLeftWhilePendingIsReleased: a Service that lets go of its Elastic IP
// (deleted, or no longer of type LoadBalancer) while Equinix has not
// approved the reservation yet leaves no reservation behind: no
// reservation is left to turn "created" later for a Service that is gone,
// which the default orphanEIPs=report would never release.
func TestLeftWhilePendingIsReleased(t *testing.T) {
	t.Parallel()
	// The emulator's clock: every reservation requested through the API is
	// pending for an hour, until the test moves the clock past it.
	var ahead atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	emu := emulator.StartForTest(t, testSeed(3), emulator.Options{ReservationPendingFor: time.Hour, Now: clock})
	h := newHarness(t, harnessOptions{emu: emu})
	ctx := context.Background()
	cluster := h.clusterID()
	metro := map[string]string{"metal.equinix.com/eip-metro": "da"}
	deleteIt := func(name string) error {
		return h.kube.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{})
	}
	toClusterIP := func(name string) error {
		_, err := h.kube.CoreV1().Services("default").Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"type":"ClusterIP"}}`), metav1.PatchOptions{})
		return err
	}
	cases := []struct {
		name  string
		key   string // sharing key, if any
		leave func(name string) error
	}{
		{name: "deleted", leave: deleteIt},
		{name: "to-cluster-ip", leave: toClusterIP},
		{name: "shared-deleted", key: "pending-key", leave: deleteIt},
	}
	for _, tc := range cases {
		tags := eip.Tags(cluster, "default", tc.name)
		if tc.key != "" {
			tags = eip.SharedTags(cluster, tc.key)
			h.sharedService(tc.name, tc.key, false, metro, "TCP/80")
		} else {
			h.addService(tc.name, metro, "")
		}
		h.eventually(tc.name+": its reservation pending approval", func() (bool, string) {
			rs := emu.ElasticReservations(emulator.DefaultProjectID, tags...)
			ev := h.events(tc.name)
			return len(rs) == 1 && rs[0].State == emulator.StatePending && strings.Contains(ev, "ElasticIPPending"),
				fmt.Sprintf("%d reservations %v; events: %s", len(rs), rs, ev)
		})
	}
	for _, tc := range cases {
		if err := tc.leave(tc.name); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		h.eventually(tc.name+": the service controller is done with it", func() (bool, string) {
			s, err := h.kube.CoreV1().Services("default").Get(ctx, tc.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			if err != nil {
				return false, err.Error()
			}
			return !slices.Contains(s.Finalizers, lbFinalizer), fmt.Sprintf("finalizers %v", s.Finalizers)
		})
	}
	// Equinix approves whatever is left.
	ahead.Store(int64(2 * time.Hour))
	for _, tc := range cases {
		tags := eip.Tags(cluster, "default", tc.name)
		if tc.key != "" {
			tags = eip.SharedTags(cluster, tc.key)
		}
		if rs := emu.ElasticReservations(emulator.DefaultProjectID, tags...); len(rs) != 0 {
			t.Errorf("%s: %d reservations leaked (%+v); events: %s", tc.name, len(rs), rs, h.events(tc.name))
		}
	}
	h.checkRBAC()
}
