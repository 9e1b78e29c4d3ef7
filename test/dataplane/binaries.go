package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The environment `make e2e` sets: where it built each binary.
const (
	EnvCCM     = "METAL_CCM_E2E_CCM"     // the CCM binary (bin/cloud-provider-equinix-metal)
	EnvMetalLB = "METAL_CCM_E2E_METALLB" // directory with controller and speaker
	EnvGoBGP   = "METAL_CCM_E2E_GOBGP"   // directory with gobgpd and gobgp
	// EnvMetalLBLegacy is a directory with MetalLB 0.12's controller and
	// speaker, the last that read the legacy ConfigMap.
	EnvMetalLBLegacy = "METAL_CCM_E2E_METALLB_LEGACY"
	// EnvWrongASNModule is the test-only module wrongasn, built for wasip1.
	EnvWrongASNModule = "METAL_CCM_E2E_WRONG_ASN_MODULE"
	// EnvFRR is the directory of Debian's FRR daemons (/usr/lib/frr: bgpd
	// and frr-reload.py), which MetalLB's speaker in FRR mode drives; only
	// the IPv6 data plane needs it (make e2e installs the frr package).
	EnvFRR = "METAL_CCM_E2E_FRR"
	// EnvMetalLBFRR is a directory with the MetalLB controller and speaker
	// that run in FRR mode (0.16: see the Makefile for why not 0.15).
	EnvMetalLBFRR = "METAL_CCM_E2E_METALLB_FRR"
	// EnvSandbox is the sandbox binary (test/cmd/sandbox), which make e2e runs
	// with the data plane.
	EnvSandbox = "METAL_CCM_E2E_SANDBOX"
)

// Binaries are the programs the data-plane test runs.
type Binaries struct {
	CCM               string
	MetalLBController string
	MetalLBSpeaker    string
	GoBGPD            string
	GoBGP             string
	// LegacyController and LegacySpeaker are MetalLB 0.12's.
	LegacyController string
	LegacySpeaker    string
	// FRR is the directory with FRR's bgpd and frr-reload.py ("" = none);
	// FRRController and FRRSpeaker the MetalLB that runs in FRR mode.
	FRR           string
	FRRController string
	FRRSpeaker    string
}

// ForFRR are these binaries with the MetalLB that runs in FRR mode as
// MetalLB's controller and speaker.
func (b Binaries) ForFRR() Binaries {
	b.MetalLBController, b.MetalLBSpeaker = b.FRRController, b.FRRSpeaker
	return b
}

// BinariesFromEnv finds the binaries `make e2e` built; a missing one is an
// error that says to run make e2e.
func BinariesFromEnv() (Binaries, error) {
	b := Binaries{
		CCM:               os.Getenv(EnvCCM),
		MetalLBController: filepath.Join(os.Getenv(EnvMetalLB), "controller"),
		MetalLBSpeaker:    filepath.Join(os.Getenv(EnvMetalLB), "speaker"),
		GoBGPD:            filepath.Join(os.Getenv(EnvGoBGP), "gobgpd"),
		GoBGP:             filepath.Join(os.Getenv(EnvGoBGP), "gobgp"),
		LegacyController:  filepath.Join(os.Getenv(EnvMetalLBLegacy), "controller"),
		LegacySpeaker:     filepath.Join(os.Getenv(EnvMetalLBLegacy), "speaker"),
		FRR:               os.Getenv(EnvFRR),
	}
	if d := os.Getenv(EnvMetalLBFRR); d != "" {
		b.FRRController, b.FRRSpeaker = filepath.Join(d, "controller"), filepath.Join(d, "speaker")
	}
	var missing []string
	if os.Getenv(EnvMetalLB) == "" || os.Getenv(EnvGoBGP) == "" || os.Getenv(EnvMetalLBLegacy) == "" || b.CCM == "" {
		return b, fmt.Errorf("e2e: %s, %s, %s and %s are not all set; run make e2e, which builds the binaries and sets them", EnvCCM, EnvMetalLB, EnvMetalLBLegacy, EnvGoBGP)
	}
	for _, p := range []string{b.CCM, b.MetalLBController, b.MetalLBSpeaker, b.GoBGPD, b.GoBGP, b.LegacyController, b.LegacySpeaker} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return b, errors.New("e2e: missing " + strings.Join(missing, ", ") + "; run make e2e, which builds them")
	}
	return b, nil
}

// DataPlaneBinaries are the four binaries of the data plane alone (MetalLB's
// controller and speaker in metallbDir, gobgpd and gobgp in gobgpDir), as
// the sandbox runs it; a missing one is an error naming it.
func DataPlaneBinaries(metallbDir, gobgpDir string) (Binaries, error) {
	if metallbDir == "" || gobgpDir == "" {
		return Binaries{}, errors.New("no MetalLB or GoBGP directory given (make run builds them and passes --metallb and --gobgp)")
	}
	b := Binaries{
		MetalLBController: filepath.Join(metallbDir, "controller"), MetalLBSpeaker: filepath.Join(metallbDir, "speaker"),
		GoBGPD: filepath.Join(gobgpDir, "gobgpd"), GoBGP: filepath.Join(gobgpDir, "gobgp"),
	}
	var missing []string
	for _, p := range []string{b.MetalLBController, b.MetalLBSpeaker, b.GoBGPD, b.GoBGP} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return b, errors.New("missing " + strings.Join(missing, ", ") + " (make run builds them with make e2e-bins)")
	}
	return b, nil
}
