//go:build system

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// TestSmoke runs the scale bench at a tiny size, so that `make ci` (build tag
// system, through `make system`) keeps the command working, and checks what it counts (counts, not times).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CCM and starts a cluster; run without -short")
	}
	dir := t.TempDir()
	ccm := filepath.Join(dir, "ccm")
	cmd := exec.Command("go", "build", "-o", ccm, "./cmd/cloud-provider-equinix-metal")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const services, nodes = 20, 4
	// As root, under the chart's limit in a real memory cgroup, as -cgroup
	// runs it.
	root := os.Geteuid() == 0
	rep, err := run(ctx, options{ccm: ccm, services: services, nodes: nodes, latency: 5 * time.Millisecond, quiet: 5 * time.Second, moduleWait: 2 * time.Minute, dir: filepath.Join(dir, "work"),
		memoryLimit: 512 << 20, cgroup: root}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.String())
	checks := []struct {
		what      string
		got, want int64
	}{
		{"reservation POSTs while filling", rep.fill.calls[emulator.RouteRequestIPReservation], services},
		{"BGP sessions created while filling", rep.fill.calls[emulator.RouteCreateBGPSession], nodes},
		{"Equinix writes with nothing changing", rep.quiet.calls[emulator.RouteRequestIPReservation] + rep.quiet.calls[emulator.RouteCreateBGPSession], 0},
		{"reservation POSTs for one more Service", rep.oneService.calls[emulator.RouteRequestIPReservation], 1},
		{"BGP sessions created for one more node", rep.oneNode.calls[emulator.RouteCreateBGPSession], 1},
		{"Service status writes for one more Service (at least)", min(int64(rep.oneService.writes["patch services/status"]), 1), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	if root && (rep.cgroupPeak <= 0 || rep.oomKills != 0) {
		t.Errorf("memory cgroup: peak charge %d bytes, %d OOM kills; want a charge read and no kill", rep.cgroupPeak, rep.oomKills)
	}
	if !rep.moduleApplied {
		t.Error("the module's objects were never all applied")
	}
	if rep.peakRSSKiB <= 0 {
		t.Errorf("peak RSS %d KiB: not read", rep.peakRSSKiB)
	}
	if rep.peakAnonKiB <= 0 || rep.peakAnonKiB > rep.peakRSSKiB {
		t.Errorf("peak anonymous RSS %d KiB (peak RSS %d KiB): not read", rep.peakAnonKiB, rep.peakRSSKiB)
	}
	if rep.fill.generate == nil || rep.fill.generate.generateCount < 1 {
		t.Error("no module generate call counted while filling")
	}
	if m := rep.module; m == nil || m.defaultErr != nil || m.minMiB < 4 {
		t.Errorf("module measurement: %+v", m)
	}
	if out := rep.String(); !strings.Contains(out, "apiserver writes per Service") {
		t.Errorf("the report lacks the writes per Service:\n%s", out)
	}
}
