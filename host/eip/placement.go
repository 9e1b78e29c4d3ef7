package eip

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

// Placer decides where a Service's Elastic IP of family fam is requested.
// The policy engine implements it (host/provider; the policy's input has
// the family, so a policy may place IPv6 elsewhere); the tests use a Go
// copy of the documented default rule (placer_test.go).
type Placer interface {
	Place(ctx context.Context, svc *v1.Service, fam v1.IPFamily) (location.Location, error)
}
