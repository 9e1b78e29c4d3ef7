//go:build linux && system

package faults

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestFaultsShort is the short fault-injection run of `make ci` (build tag system): a few
// dozen Service cycles under 10% Equinix API faults and two kill -9 (the
// leader, then the follower). `make soak` is the long run.
func TestFaultsShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CCM and starts a cluster; run without -short")
	}
	ccm := os.Getenv("METAL_CCM_FAULTS_CCM") // make test may pass the binary it built
	if ccm == "" {
		ccm = buildCCM(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rep, err := Run(ctx, Options{CCM: ccm, Dir: dir, Cycles: 30, Kills: 2, FaultRate: 0.1,
		// Lost answers held for 10 s, not 35: the short run keeps to
		// about a minute and a half.
		LostFor: 10 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatalf("%v (logs kept in %s)", err, keep(dir))
	}
	t.Log("\n" + rep.String())
	if !rep.Converged {
		t.Errorf("not converged after the faults stopped: %s", Summary(rep.Problems, 20))
	}
	if rep.MaxReservationsPerService > 1 {
		t.Errorf("%d reservations for one Service at once: a duplicate", rep.MaxReservationsPerService)
	}
	for _, c := range rep.Crashes {
		t.Errorf("crash: %s", c)
	}
	if len(rep.IPTimeouts) > 0 {
		t.Errorf("Services without an address after %v: %v", rep.Options.IPTimeout, rep.IPTimeouts)
	}
	// The run did what it says: faults were injected, both kills happened,
	// one of them the leader's, and Services got addresses.
	if total(rep.Faults) == 0 {
		t.Error("no fault was injected")
	}
	if rep.Kills != 2 || rep.LeaderKills != 1 {
		t.Errorf("%d kills (%d of the leader), want 2 (1)", rep.Kills, rep.LeaderKills)
	}
	if len(rep.TimesToIP) == 0 {
		t.Error("no Service got an address during the churn")
	}
	if t.Failed() {
		t.Logf("logs kept in %s", keep(dir))
	}
}

// buildCCM builds the binary for the test.
func buildCCM(t *testing.T) string {
	t.Helper()
	ccm := filepath.Join(t.TempDir(), "ccm")
	cmd := exec.Command("go", "build", "-o", ccm, "./cmd/cloud-provider-equinix-metal")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return ccm
}

// keep copies the CCM logs out of the test's temporary directory.
func keep(dir string) string {
	out, err := os.MkdirTemp("", "ccm-faults-logs-")
	if err != nil {
		return dir
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(out, filepath.Base(l)), b, 0o644)
		}
	}
	return out
}
