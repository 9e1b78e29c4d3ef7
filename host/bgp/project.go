package bgp

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// projectAPI is what enabling BGP on the project needs.
type projectAPI interface {
	ProjectBGPConfig(ctx context.Context) (*metalv1.BgpConfig, error)
	EnableProjectBGP(ctx context.Context, asn int64, md5 config.Secret) error
}

// ProjectState is the project's BGP configuration as the CCM uses it.
type ProjectState struct {
	ASN int64
	// Adopted is true when the project already had BGP enabled; its ASN and
	// password won over the configured ones (upstream issue #263).
	Adopted bool
}

// EnableProject makes sure the project has local BGP enabled. An existing
// configuration is adopted as it is; otherwise one is requested with the
// configured ASN and password. The API answers 404, or 200 with an empty
// object, when BGP was never enabled; the client reports both as
// metal.ErrBGPNotEnabled.
func EnableProject(ctx context.Context, api projectAPI, asn uint32, password config.Secret) (ProjectState, error) {
	cur, err := api.ProjectBGPConfig(ctx)
	if err != nil && !errors.Is(err, metal.ErrBGPNotEnabled) {
		return ProjectState{}, fmt.Errorf("reading the project's BGP configuration: %w", err)
	}
	if err == nil && enabled(cur) {
		klog.InfoS("Project BGP already enabled; adopting its ASN and password", "asn", cur.GetAsn(), "status", cur.GetStatus())
		return ProjectState{ASN: cur.GetAsn(), Adopted: true}, nil
	}
	if password != "" && !bgpPassPattern.MatchString(password.Reveal()) {
		return ProjectState{}, errors.New("bgpPass (METAL_BGP_PASS or \"bgpPass\" in the cloud-config) must be 10 to 20 letters and digits, as the Equinix Metal API requires, to enable BGP on the project (the value is not shown); fix it, or enable the project's BGP yourself and this CCM adopts its password")
	}
	if err := api.EnableProjectBGP(ctx, int64(asn), password); err != nil {
		return ProjectState{}, fmt.Errorf("enabling BGP on the project with ASN %d: %w", asn, err)
	}
	klog.InfoS("Enabled BGP on the project", "asn", asn)
	return ProjectState{ASN: int64(asn)}, nil
}

// bgpPassPattern is what the Equinix Metal API accepts for a project's BGP
// MD5 password (BgpConfigRequestInput.md5). Only checked when this CCM sets
// the password: an adopted project keeps its own, whatever bgpPass says.
var bgpPassPattern = regexp.MustCompile(`^[A-Za-z0-9]{10,20}$`)

func enabled(c *metalv1.BgpConfig) bool {
	return c != nil && c.GetId() != "" && c.GetStatus() != metalv1.BGPCONFIGSTATUS_DISABLED
}
