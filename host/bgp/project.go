package bgp

import (
	"context"
	"fmt"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	"k8s.io/klog/v2"
)

// ProjectAPI is what enabling BGP on the project needs.
type ProjectAPI interface {
	ProjectBGPConfig(ctx context.Context) (*metalv1.BgpConfig, error)
	EnableProjectBGP(ctx context.Context, asn int64, md5 string) error
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
// configured ASN and password. The API answers 200 with an empty object when
// BGP was never enabled, so "enabled" means an ID and a status other than
// disabled.
func EnableProject(ctx context.Context, api ProjectAPI, asn uint32, password string) (ProjectState, error) {
	cur, err := api.ProjectBGPConfig(ctx)
	if err != nil {
		return ProjectState{}, fmt.Errorf("reading the project's BGP configuration: %w", err)
	}
	if enabled(cur) {
		klog.InfoS("Project BGP already enabled; adopting its ASN and password", "asn", cur.GetAsn(), "status", cur.GetStatus())
		return ProjectState{ASN: cur.GetAsn(), Adopted: true}, nil
	}
	if err := api.EnableProjectBGP(ctx, int64(asn), password); err != nil {
		return ProjectState{}, fmt.Errorf("enabling BGP on the project with ASN %d: %w", asn, err)
	}
	klog.InfoS("Enabled BGP on the project", "asn", asn)
	return ProjectState{ASN: int64(asn)}, nil
}

func enabled(c *metalv1.BgpConfig) bool {
	return c != nil && c.GetId() != "" && c.GetStatus() != metalv1.BGPCONFIGSTATUS_DISABLED
}
