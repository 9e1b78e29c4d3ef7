package eip

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Location is where a reservation is requested: exactly one of the two.
type Location struct {
	Metro    string
	Facility string
}

func (l Location) String() string {
	if l.Facility != "" {
		return "facility " + l.Facility
	}
	return "metro " + l.Metro
}

// Placer decides where a Service's Elastic IP is requested. The policy
// engine implements it; DefaultPlacer is the documented rule without it.
type Placer interface {
	Place(ctx context.Context, svc *v1.Service) (Location, error)
}

// DefaultPlacer applies the order the upstream README documents: the global
// facility, the global metro, the Service's facility annotation, the
// Service's metro annotation. (Upstream's code used the opposite order; the
// README is the contract.)
type DefaultPlacer struct {
	Metro, Facility                     string
	MetroAnnotation, FacilityAnnotation string
}

// Place implements Placer.
func (p DefaultPlacer) Place(_ context.Context, svc *v1.Service) (Location, error) {
	switch {
	case p.Facility != "":
		return Location{Facility: p.Facility}, nil
	case p.Metro != "":
		return Location{Metro: p.Metro}, nil
	case svc.Annotations[p.FacilityAnnotation] != "":
		return Location{Facility: svc.Annotations[p.FacilityAnnotation]}, nil
	case svc.Annotations[p.MetroAnnotation] != "":
		return Location{Metro: svc.Annotations[p.MetroAnnotation]}, nil
	}
	return Location{}, fmt.Errorf("no location for the Elastic IP: annotate the Service with %s=<metro> (or %s=<facility>), or set the metro (METAL_METRO_NAME) or facility (METAL_FACILITY_NAME) of the CCM", p.MetroAnnotation, p.FacilityAnnotation)
}
