package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator/specvalidate"
)

const seedYAML = `
tokens:
  - token: sandbox-token
projects:
  - id: 5f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f
    name: sandbox
    bgp: {asn: 65000}
metros:
  - code: da
    name: Dallas
facilities:
  - code: da11
    metro: da
devices:
  - id: 7a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d
    hostname: control-plane-0
reservations:
  - tags: ["cluster-api-provider-packet:cluster-id:sandbox"]
`

// TestBinary starts the emulator as a person would: an address, a seed
// file, -v; then talks to it with the SDK and reads its log.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; run without -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "metal-emulator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	seed := filepath.Join(dir, "seed.yaml")
	if err := os.WriteFile(seed, []byte(seedYAML), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-seed", seed, "-v", "-devices", "3")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(re *regexp.Regexp) []string {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the emulator exited before printing %s", re)
				}
				if m := re.FindStringSubmatch(l); m != nil {
					return m
				}
			case <-timeout:
				t.Fatalf("no line matching %s", re)
			}
		}
	}
	url := next(regexp.MustCompile(`serving the Equinix Metal API at (http://127\.0\.0\.1:\d+/metal/v1)$`))[1]
	next(regexp.MustCompile(`project 5f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f \(sandbox\): 4 devices`))

	cfg := metalv1.NewConfiguration()
	cfg.Servers = metalv1.ServerConfigurations{{URL: url}}
	cfg.AddDefaultHeader("X-Auth-Token", "sandbox-token")
	specvalidate.Instrument(t, cfg, specvalidate.Options{})
	c := metalv1.NewAPIClient(cfg)
	ctx := context.Background()
	d, _, err := c.DevicesApi.FindDeviceById(ctx, "7a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d").Execute()
	if err != nil || d.GetHostname() != "control-plane-0" || d.Facility.GetCode() != "da11" {
		t.Fatalf("device %v, %v", d, err)
	}
	m := next(regexp.MustCompile(`msg=request method=GET path=/metal/v1/devices/7a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d route="GET /devices/\{id\}" status=200`))
	if len(m) == 0 {
		t.Fatal("no request log line")
	}
	list, _, err := c.DevicesApi.FindProjectDevices(ctx, "5f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f").Hostname("node-2").Execute()
	if err != nil || len(list.Devices) != 1 {
		t.Fatalf("hostname=node-2: %v, %v", list, err)
	}
	if _, _, err := c.BGPApi.FindBgpConfigByProject(ctx, "5f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f").Execute(); err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next(regexp.MustCompile(`stopping after 3 requests`))
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
}

func TestFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-print-default-seed"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s, err := emulator.ParseSeed(out.Bytes(), ".json")
	if err != nil || len(s.Metros) != 4 || s.Projects[0].ID != emulator.DefaultProjectID {
		t.Errorf("printed seed %v: %v", s, err)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("devices:\n  - hostname: x\n    metro: nowhere\n"), 0o600)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-seed", bad}, 1, "Metro nowhere not found"},
		{[]string{"-seed", "/nonexistent.yaml"}, 1, "no such file"},
		{[]string{"-addr", "256.0.0.1:1"}, 1, "256.0.0.1"},
		{[]string{"-nope"}, 2, "flag provided but not defined"},
		{[]string{"stray"}, 2, "unexpected arguments"},
		{[]string{"-h"}, 0, "Usage: metal-emulator"},
	} {
		var o, e bytes.Buffer
		code := run(tc.args, &o, &e)
		if code != tc.code || !strings.Contains(e.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, e.String(), tc.code, tc.want)
		}
	}
}
