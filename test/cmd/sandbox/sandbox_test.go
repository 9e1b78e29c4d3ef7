//go:build system

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSandbox runs what `make run` runs, for long enough to see every part
// work, including a control-plane failover, and checks the live view. It
// gives no MetalLB or GoBGP, so it also checks the one line that says the
// data plane is off and why; the data plane itself is checked by make e2e
// (test/e2e, TestSandboxDataPlane).
func TestSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and the CCM for a minute; run without -short")
	}
	dir := t.TempDir()
	build := func(out, pkg string) string {
		bin := filepath.Join(dir, out)
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = "../../.."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		return bin
	}
	ccm := build("ccm", "./cmd/cloud-provider-equinix-metal")
	sandbox := build("sandbox", "./test/cmd/sandbox")

	cmd := exec.Command(sandbox, "--ccm", ccm, "--plain", "--duration", "60s", "--failover-after", "25s", "--refresh", "2s", "--dir", filepath.Join(dir, "work"))
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("sandbox: %v\n%s", err, tail(text, 60))
	}
	if !strings.Contains(text, "==> data plane off (no MetalLB speakers or routers in the view): no MetalLB or GoBGP directory given (make run builds them and passes --metallb and --gobgp)\n") {
		t.Errorf("no line saying the data plane is off and why:\n%s", tail(text, 60))
	}
	if !strings.Contains(text, "what a sync would change, from this shell: "+ccm+" plan --kubeconfig ") {
		t.Errorf("no line saying how to run plan against the sandbox:\n%s", tail(text, 60))
	}
	last := text[strings.LastIndex(text, "Equinix Metal CCM sandbox"):]
	for _, want := range []string{
		"metro da, created",                         // web's EIP, where its annotation says
		"metro sv, created",                         // api's
		"198.18.63.10",                              // byo keeps its own address (sandbox.BYOAddress, reserved by the user)
		"none: bring your own IP",                   // and reserves nothing
		"denied Service",                            // nowhere: the placement policy's clear error
		"equinixmetal://",                           // nodes initialised
		"169.254.255.1 AS65530",                     // BGP peers in the annotations
		"IPAddressPool     3",                       // one pool per Service with an address
		"BGPPeer           16",                      // 8 nodes x 2 peers
		"BGPAdvertisement  3",                       // the default one (no pool left in it) and one per metro
		"failover: the EIP moved from cp-0 to cp-1", // within metro da (cp-2 is in sv)
	} {
		if !strings.Contains(last, want) {
			t.Errorf("the last view lacks %q:\n%s", want, last)
		}
	}
	// An Elastic IP is routed only in its metro, so MetalLB would announce
	// each pool from that metro's nodes alone (sandbox.Devices: five in
	// da, three in sv).
	da, sv := "5: cp-0 cp-1 worker-0 worker-1 worker-2", "3: cp-2 worker-3 worker-4"
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ +default\.web +\S+/32 +` + regexp.QuoteMeta(da) + `$`),
		regexp.MustCompile(`(?m)^ +default\.api +\S+/32 +` + regexp.QuoteMeta(sv) + `$`),
		regexp.MustCompile(`(?m)^ +default\.byo +198\.18\.63\.10/32 +` + regexp.QuoteMeta(da) + `$`),
	} {
		if !want.MatchString(last) {
			t.Errorf("the last view lacks %s:\n%s", want, last)
		}
	}
	if strings.Contains(text, "emulator-token") {
		t.Error("the API key was printed")
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
