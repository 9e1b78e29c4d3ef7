package plan

import (
	"context"
	"reflect"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
)

// Take hands over each kind of captured write in its own field, and
// forgets them all: the next Take sees only what came after.
func TestMetalTake(t *testing.T) {
	ctx := context.Background()
	m := newMetal(nil) // the captured writes never reach the client
	req := metal.ReservationRequest{Location: location.Location{Metro: "da"}, Tags: []string{"a", "b"}}
	if _, err := m.RequestReservation(ctx, req); err != nil {
		t.Fatal(err)
	}
	// The same tags again: idempotent, as the real client is.
	if _, err := m.RequestReservation(ctx, metal.ReservationRequest{Location: req.Location, Tags: []string{"b", "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteIP(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := m.EnableProjectBGP(ctx, 65000, ""); err != nil {
		t.Fatal(err)
	}
	asn := int64(65000)
	want := metalWrites{Requests: []metal.ReservationRequest{req}, Deletes: []string{"r1"}, ProjectASN: &asn}
	if got := m.Take(); !reflect.DeepEqual(got, want) {
		t.Errorf("Take() = %+v, want %+v", got, want)
	}
	if got := m.Take(); !reflect.DeepEqual(got, metalWrites{}) {
		t.Errorf("second Take() = %+v, want nothing", got)
	}
}
