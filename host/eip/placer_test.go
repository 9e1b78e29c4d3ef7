package eip

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

// defaultPlacer is the tests' Go copy of the default placement policy
// (policies/eip.rego). It applies the order the upstream README documents: the global
// facility, the global metro, the Service's facility annotation, the
// Service's metro annotation. (Upstream's code used the opposite order; the
// README is the contract.)
type defaultPlacer struct {
	Metro, Facility                     string
	MetroAnnotation, FacilityAnnotation string
}

// Place implements Placer.
func (p defaultPlacer) Place(_ context.Context, svc *v1.Service, _ v1.IPFamily) (location.Location, error) {
	switch {
	case p.Facility != "":
		return location.Location{Facility: p.Facility}, nil
	case p.Metro != "":
		return location.Location{Metro: p.Metro}, nil
	case svc.Annotations[p.FacilityAnnotation] != "":
		return location.Location{Facility: svc.Annotations[p.FacilityAnnotation]}, nil
	case svc.Annotations[p.MetroAnnotation] != "":
		return location.Location{Metro: svc.Annotations[p.MetroAnnotation]}, nil
	}
	return location.Location{}, fmt.Errorf("no location for the Elastic IP: annotate the Service with %s=<metro> (or %s=<facility>), or set the metro (METAL_METRO_NAME) or facility (METAL_FACILITY_NAME) of the CCM", p.MetroAnnotation, p.FacilityAnnotation)
}
