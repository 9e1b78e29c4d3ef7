package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// orphanCluster is a running CCM with two Services that have their Elastic
// IPs, plus reservations that are not its to touch: another cluster's
// Service EIP and a control-plane EIP.
type orphanCluster struct {
	*harness
	opts     harnessOptions
	ids      map[string]string // Service name -> reservation ID
	foreign  []string          // reservation IDs that must survive
	orphaned time.Time
}

func startOrphanCluster(t *testing.T, settings map[string]any) *orphanCluster {
	t.Helper()
	// A short refresh period: orphans are looked for after each full refresh.
	s := map[string]any{"cacheRefreshPeriod": "300ms"}
	for k, v := range settings {
		s[k] = v
	}
	o := harnessOptions{settings: s}
	h := newHarness(t, o)
	oc := &orphanCluster{harness: h, opts: o, ids: map[string]string{}}
	for i := range 3 {
		h.addNode(fmt.Sprintf("node-%d", i), nil)
	}
	for _, name := range []string{"keep", "gone"} {
		h.addService(name, map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	}
	cluster := h.clusterID()
	for _, name := range []string{"keep", "gone"} {
		h.eventually("Service "+name+" gets its EIP", func() (bool, string) {
			ip, msg := h.serviceIP(name)
			return ip != "", msg
		})
		rs := h.emu.ElasticReservations(emulator.DefaultProjectID, eip.Tags(cluster, "default", name)...)
		if len(rs) != 1 {
			t.Fatalf("Service %s has %d reservations, want 1", name, len(rs))
		}
		oc.ids[name] = rs[0].ID
	}
	// Another cluster's Service EIP (for a Service named like ours) and a
	// control-plane EIP: never orphans of this cluster.
	for _, tags := range [][]string{eip.Tags("another-cluster-uid", "default", "gone"), {"my-control-plane-eip"}} {
		r, err := h.emu.AddReservation(emulator.ReservationSeed{Metro: "da", Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		oc.foreign = append(oc.foreign, r.ID)
	}
	h.eventually("no orphan before the test makes one", func() (bool, string) {
		v := gaugeValue(t, "equinix_metal_eip_orphans")
		return v == 0, fmt.Sprintf("equinix_metal_eip_orphans = %v", v)
	})
	return oc
}

// orphan makes the Service "gone" an orphan the way a crash does: the CCM
// is down while its finalizer is removed and it is deleted, so nothing ever
// releases its EIP. Then the CCM starts again on the same cluster.
func (oc *orphanCluster) orphan() {
	oc.t.Helper()
	ctx := context.Background()
	oc.Stop()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := oc.kube.CoreV1().Services("default").Patch(ctx, "gone", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		oc.t.Fatal(err)
	}
	if err := oc.kube.CoreV1().Services("default").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		oc.t.Fatal(err)
	}
	oc.orphaned = time.Now()
	o := oc.opts
	o.env, o.emu = oc.env, oc.emu
	oc.harness = newHarness(oc.t, o)
}

func (oc *orphanCluster) exists(id string) bool {
	_, ok := oc.emu.Reservation(id)
	return ok
}

// checkUntouched asserts that the kept Service's EIP and the foreign
// reservations are all still there.
func (oc *orphanCluster) checkUntouched() {
	oc.t.Helper()
	for _, id := range append([]string{oc.ids["keep"]}, oc.foreign...) {
		if !oc.exists(id) {
			oc.t.Errorf("reservation %s was released; it is not an orphan of this cluster", id)
		}
	}
}

func TestOrphanReportedNotReleasedByDefault(t *testing.T) {
	oc := startOrphanCluster(t, nil)
	oc.orphan()
	oc.eventually("the orphan is counted", func() (bool, string) {
		v := gaugeValue(t, "equinix_metal_eip_orphans")
		return v == 1, fmt.Sprintf("equinix_metal_eip_orphans = %v", v)
	})
	// Several more refreshes: still reported, never released.
	time.Sleep(2 * time.Second)
	if !oc.exists(oc.ids["gone"]) {
		t.Fatal("orphanEIPs=report released the orphan")
	}
	if v := gaugeValue(t, "equinix_metal_eip_orphans"); v != 1 {
		t.Errorf("equinix_metal_eip_orphans = %v, want 1", v)
	}
	oc.checkUntouched()
}

func TestOrphanReleasedAfterGrace(t *testing.T) {
	const grace = 3 * time.Second
	oc := startOrphanCluster(t, map[string]any{"orphanEIPs": "release", "orphanEIPGrace": grace.String()})
	released := metricValue(t, "equinix_metal_eip_orphans_released_total")
	oc.orphan()
	oc.eventually("the orphan is released", func() (bool, string) {
		return !oc.exists(oc.ids["gone"]), "reservation " + oc.ids["gone"] + " still exists"
	})
	if waited := time.Since(oc.orphaned); waited < grace {
		t.Errorf("released %s after the Service went, before the grace period of %s", waited, grace)
	}
	if v := metricValue(t, "equinix_metal_eip_orphans_released_total"); v != released+1 {
		t.Errorf("equinix_metal_eip_orphans_released_total went from %v to %v, want +1", released, v)
	}
	oc.checkUntouched()
}

func TestOrphanKeptWhenServiceReturnsWithinGrace(t *testing.T) {
	const grace = 4 * time.Second
	oc := startOrphanCluster(t, map[string]any{"orphanEIPs": "release", "orphanEIPGrace": grace.String()})
	ip := oc.emu.ElasticReservations(emulator.DefaultProjectID, eip.Tags(oc.clusterID(), "default", "gone")...)[0].Prefix.Addr().String()
	oc.orphan()
	oc.eventually("the orphan is seen", func() (bool, string) {
		v := gaugeValue(t, "equinix_metal_eip_orphans")
		return v == 1, fmt.Sprintf("equinix_metal_eip_orphans = %v", v)
	})
	// The Service is recreated within the grace period.
	oc.addService("gone", map[string]string{"metal.equinix.com/eip-metro": "da"}, "")
	oc.eventually("the recreated Service gets its old address back", func() (bool, string) {
		got, msg := oc.serviceIP("gone")
		return got == ip, fmt.Sprintf("ip %q (want %s) %s", got, ip, msg)
	})
	// Well past the grace period: the reservation stays.
	time.Sleep(2 * grace)
	if !oc.exists(oc.ids["gone"]) {
		t.Fatal("the reservation of a Service recreated within the grace period was released")
	}
	if v := gaugeValue(t, "equinix_metal_eip_orphans"); v != 0 {
		t.Errorf("equinix_metal_eip_orphans = %v, want 0", v)
	}
	oc.checkUntouched()
}

func gaugeValue(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetGauge().GetValue()
			}
			return v
		}
	}
	return 0
}
