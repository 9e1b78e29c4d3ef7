package metal

import (
	"reflect"
	"testing"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
)

// TestCompactReservationRoundTrip: what the cache gives back is the
// reservation as decoded, for every member the CCM reads (those
// reservationShape keeps), with absent members still absent and explicit
// zero values (public=false, cidr=0) still present; the members the
// listing's trim drops anyway are dropped.
func TestCompactReservationRoundTrip(t *testing.T) {
	created := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	assigned := metalv1.IPAssignmentState("assigned")
	full := func() metalv1.IPReservation {
		return metalv1.IPReservation{
			Id: metalv1.PtrString("r1"), Href: metalv1.PtrString("/metal/v1/ips/r1"), Type: metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4,
			State: metalv1.PtrString("created"), Tags: []string{"usage=cloud-provider-equinix-metal-auto", "cluster=c1"},
			Details: metalv1.PtrString("web"), CreatedAt: &created, Address: metalv1.PtrString("147.75.1.2"),
			AddressFamily: metalv1.PtrInt32(4), Cidr: metalv1.PtrInt32(32), Network: metalv1.PtrString("147.75.1.2"),
			Public: metalv1.PtrBool(true), Management: metalv1.PtrBool(false),
			Metro:    &metalv1.IPReservationMetro{Id: metalv1.PtrString("m1"), Code: metalv1.PtrString("da")},
			Facility: &metalv1.IPReservationFacility{Id: metalv1.PtrString("f1"), Code: metalv1.PtrString("da11"), Metro: &metalv1.DeviceMetro{Code: metalv1.PtrString("da")}},
			Assignments: []metalv1.IPAssignment{{
				Id: metalv1.PtrString("a1"), Href: metalv1.PtrString("/metal/v1/ips/a1"), State: &assigned,
				Address: metalv1.PtrString("147.75.1.2"), AddressFamily: metalv1.PtrInt32(4), Cidr: metalv1.PtrInt32(0),
				Network: metalv1.PtrString("147.75.1.2"), Public: metalv1.PtrBool(false), Management: metalv1.PtrBool(false),
				AssignedTo: &metalv1.Href{Href: "/metal/v1/devices/d1"},
				Metro:      &metalv1.IPAssignmentMetro{Id: metalv1.PtrString("m1"), Code: metalv1.PtrString("da")},
			}},
		}
	}
	withDropped := full()
	withDropped.Gateway = metalv1.PtrString("147.75.1.1")
	withDropped.Project = &metalv1.Project{Id: metalv1.PtrString("p1")}
	withDropped.Assignments[0].ParentBlock = &metalv1.ParentBlock{Network: metalv1.PtrString("147.75.1.0")}

	tests := []struct {
		name    string
		in, out metalv1.IPReservation
	}{
		{"every member the CCM reads", full(), full()},
		{"members the listing's trim drops", withDropped, full()},
		{"only an ID and a type", metalv1.IPReservation{Id: metalv1.PtrString("r2"), Type: metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4},
			metalv1.IPReservation{Id: metalv1.PtrString("r2"), Type: metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compactReservation(&tt.in).toSDK()
			if !reflect.DeepEqual(got, tt.out) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tt.out)
			}
		})
	}

	// The caller's copy is its own: changing it leaves the cache as it was.
	r := full()
	c := compactReservation(&r)
	got := c.toSDK()
	got.Tags[0], got.Assignments[0].Id = "changed", metalv1.PtrString("changed")
	if again := c.toSDK(); !reflect.DeepEqual(again, full()) {
		t.Errorf("a change to a returned reservation reached the cache: %+v", again)
	}
}
