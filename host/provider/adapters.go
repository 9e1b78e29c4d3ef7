package provider

import (
	"context"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// reservations adapts the Equinix client to what the EIP lifecycle needs.
type reservations struct{ *metal.Client }

func (r reservations) RequestReservation(ctx context.Context, loc eip.Location, tags []string, details string) (*metalv1.IPReservation, error) {
	return r.Client.RequestReservation(ctx, metal.ReservationRequest{Metro: loc.Metro, Facility: loc.Facility, Tags: tags, Details: details})
}
